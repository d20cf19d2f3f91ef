package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Aggregates gives access to every aggregate, either directly on a Store
// or inside one of its transactions.
type Aggregates interface {
	Teams() Teams
	Users() Users
	Tokens() Tokens
	Jobs() Jobs
	Units() Units
	Leases() Leases
	Events() Events
	Samples() Samples
	Alerts() Alerts
	Loop() Loop
	Agents() Agents
	JobLogs() JobLogs
}

// Tx is the view of a store inside a transaction: everything done through
// it commits together or not at all.
type Tx interface {
	Aggregates
}

// Store is a backend: the aggregates, transactions and Close.
type Store interface {
	Aggregates
	// Tx runs fn in one transaction and commits it if fn returns nil; an
	// error or a panic from fn rolls everything back, and the error is
	// returned as it is. Transactions are serializable. fn must touch only
	// tx (not the Store, nor the outside world: no provider calls): a
	// backend may run it again after a serialization failure, and on
	// SQLite, which has one writer, a write through the Store inside fn
	// would wait for fn itself.
	Tx(ctx context.Context, fn func(tx Tx) error) error
	// Close releases the backend's connections. Using the store after
	// Close is an error.
	Close() error
}

// Leader is implemented by backends that can elect a single control-loop
// leader among the processes sharing them.
type Leader interface {
	// TryLeader takes the leadership lock named by key without waiting.
	// ok is false when another holder has it. release gives it up; it is
	// safe to call more than once. The lock also ends with the process or
	// its database connection, so a leader must call TryLeader's release
	// and stop acting as leader on any store error.
	TryLeader(ctx context.Context, key int64) (release func(), ok bool, err error)
}

// DefaultLimit is the page size when a filter leaves Limit zero.
const DefaultLimit = 100

// MaxLimit is the largest page size.
const MaxLimit = 1000

// Page is one page of a listing. Next is the cursor of the following page,
// empty on the last one.
type Page[T any] struct {
	Items []T
	Next  string
}

// PageLimit validates a filter's Limit and returns the page size to use.
func PageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultLimit, nil
	case limit < 0 || limit > MaxLimit:
		return 0, &core.FieldError{Field: "limit", Value: strconv.Itoa(limit), Allowed: fmt.Sprintf("1..%d (0 for %d)", MaxLimit, DefaultLimit)}
	}
	return limit, nil
}

// EncodeCursor returns the opaque cursor after the row with sequence seq
// in a listing of kind ("jobs", "events", ...).
func EncodeCursor(kind string, seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + strconv.FormatInt(seq, 10)))
}

// DecodeCursor returns the sequence in a cursor of kind; an empty cursor
// is the start (ok false).
func DecodeCursor(kind, cursor string) (seq int64, ok bool, err error) {
	if cursor == "" {
		return 0, false, nil
	}
	bad := &core.FieldError{Field: "cursor", Value: abbrev(cursor), Allowed: "a cursor returned by a previous " + kind + " listing"}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, false, bad
	}
	k, n, found := strings.Cut(string(raw), ":")
	if !found || k != kind {
		return 0, false, bad
	}
	seq, err = strconv.ParseInt(n, 10, 64)
	if err != nil || seq < 0 {
		return 0, false, bad
	}
	return seq, true, nil
}
