package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// EventFilter selects events; empty fields match everything. From is
// inclusive, To exclusive.
type EventFilter struct {
	Subject string
	Kind    string
	// Team selects the events that concern one team (see EventTeam), so
	// that a team's own roles can read its trail without seeing another
	// team's.
	Team string
	From time.Time
	To   time.Time
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
	// On PostgreSQL an event committed while a listing is read page by
	// page may carry a sequence number below the cursor and be missed by
	// that listing; the next listing has it.
	ListEvents(ctx context.Context, f EventFilter) (Page[core.Event], error)
	// ListRuns returns the finished runs of units that overlap [f.From,
	// f.To), in the order they ended. The store records a run itself
	// whenever a running unit's row stops running or moves (a trigger on
	// the units table), so reports can allocate cost to teams after the
	// unit's Parts are gone. Runs in progress are not here: they are the
	// live units.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
}

// EventTeam is the rule by which an event concerns a team, applied when it
// is appended: its Attrs["team"] when set; else, for an event that is not
// an admin action (kind "audit.*"), the team of the job its subject names
// ("job" or a unit key "job#shard"); else none. Audit events name their
// team explicitly, so that a team id that happens to equal a job id
// cannot expose one team's administration to another.
const EventTeam = "team"

// JobOfSubject returns the job id an event subject names when it is a
// job id or a unit key ("job#shard"); job ids cannot contain '#'.
func JobOfSubject(subject string) string {
	if i := strings.LastIndexByte(subject, '#'); i >= 0 {
		return subject[:i]
	}
	return subject
}

// Run is one stretch of time a unit held GPUs: Parts from Start to End,
// with the team and per-GPU share of its job.
type Run struct {
	JobID string
	Shard int
	// Shards is the job's shard count (0 or 1 for an unsharded job), so
	// that the run's unit can be named by its key (Unit.Key).
	Shards      int
	Team        string
	MilliPerGPU core.Milli
	Parts       []Part
	Start, End  time.Time
}

// Key is the key of the run's unit, as Unit.Key spells it.
func (r *Run) Key() string {
	u := Unit{JobID: r.JobID, Shard: r.Shard}
	return u.Key(r.Shards)
}

// RunFilter selects runs overlapping [From, To); a zero bound is open.
type RunFilter struct {
	From, To time.Time
	// Limit caps the result (0: MaxRuns).
	Limit int
}

// MaxRuns is the most runs one ListRuns returns.
const MaxRuns = 100_000

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
