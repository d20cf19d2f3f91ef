//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import (
	"os"
	"sync"
)

// held lists the lock files taken by this process where flock is not
// available: leadership is then per process only.
var held sync.Map

func lockFile(f *os.File) (bool, error) {
	_, taken := held.LoadOrStore(f.Name(), true)
	return !taken, nil
}

func unlockFile(f *os.File) { held.Delete(f.Name()) }
