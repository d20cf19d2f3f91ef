package store

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// EventFilter selects events; empty fields match everything. From is
// inclusive, To exclusive.
type EventFilter struct {
	Subject string
	Kind    string
	From    time.Time
	To      time.Time
	// Limit is the page size (0: DefaultLimit); Cursor the Next of the
	// previous page.
	Limit  int
	Cursor string
}

// Events is the append-only audit trail: every decision and state change
// with its reason. Nothing updates or deletes an event (the schema refuses
// it too).
type Events interface {
	// AppendEvents stores events (their Seq is ignored) and returns the
	// sequence numbers given to them, increasing in append order.
	AppendEvents(ctx context.Context, events ...core.Event) ([]int64, error)
	// ListEvents returns a page of the events f selects in sequence order.
	// On PostgreSQL an event committed while a listing is under way may
	// carry a sequence number below the cursor; a reader that follows the
	// trail live re-reads from a cursor a little behind.
	ListEvents(ctx context.Context, f EventFilter) (Page[core.Event], error)
}

// ValidateEvent reports the first problem with e.
func ValidateEvent(e *core.Event) error {
	if e.At.IsZero() {
		return &core.FieldError{Field: "at", Value: "", Allowed: "the time of the event"}
	}
	if err := CheckID("kind", e.Kind); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"subject", e.Subject}, {"reason", e.Reason}} {
		if err := CheckText(f.name, f.v); err != nil {
			return err
		}
	}
	for k, v := range e.Attrs {
		if err := CheckID("attrs", k); err != nil {
			return err
		}
		if err := CheckText(fmt.Sprintf("attrs[%s]", k), v); err != nil {
			return err
		}
	}
	return nil
}
