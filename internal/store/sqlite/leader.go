package sqlite

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// TryLeader implements store.Leader. SQLite serves the processes of one
// machine, so leadership is an exclusive lock on a file beside the
// database (path-leader-KEY.lock): it keeps a second server on the same
// file from running a second control loop, and ends with the process.
func (s *Store) TryLeader(ctx context.Context, key int64) (func(), bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("try leader: %w", err)
	}
	name := fmt.Sprintf("%s-leader-%d.lock", s.path, key)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("try leader: %w", err)
	}
	ok, err := lockFile(f)
	if err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("try leader %s: %w", name, err)
		}
		return nil, false, nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			unlockFile(f)
			f.Close()
		})
	}, true, nil
}
