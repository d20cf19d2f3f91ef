package loop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
)

// recorder is a Driver that writes down what it is called with.
type recorder struct {
	calls     []string
	commitErr error
	// inputsSaw is the first lease's state when Inputs ran.
	inputsSaw core.LeaseState
	turned    Turned
	acquired  Acquired
}

func (r *recorder) Inputs(_ context.Context, st *engine.State, _ time.Time) ([]core.Event, error) {
	r.calls = append(r.calls, "inputs")
	r.inputsSaw = st.Leases[0].State
	return []core.Event{{Kind: "input"}}, nil
}

func (r *recorder) Decided(context.Context, *engine.State, *engine.Decisions) []core.Event {
	r.calls = append(r.calls, "decided")
	return []core.Event{{Kind: "decided"}}
}

func (r *recorder) Commit(_ context.Context, _ *engine.State, t Turned) error {
	r.calls = append(r.calls, "commit")
	r.turned = t
	return r.commitErr
}

func (r *recorder) ReleaseFailed(string, error) error { return nil }

func (r *recorder) Acquired(_ context.Context, _ *engine.State, _ time.Time, a Acquired) error {
	r.calls = append(r.calls, "acquired")
	r.acquired = a
	return nil
}

// A turn observes the provider before the driver's inputs (so a machine's
// end at an instant wins over a unit's end then, in the server and the
// simulator alike), commits before it touches a machine, and touches
// none when the commit fails.
func TestTurnOrder(t *testing.T) {
	st, cloud, clk := world(t)
	ctx := context.Background()

	failed := &recorder{commitErr: errors.New("store down (injected)")}
	if err := Turn(ctx, st, cloud, t0, engine.Config{}, failed, Hooks{}); !errors.Is(err, failed.commitErr) {
		t.Fatalf("a failed commit: Turn returned %v", err)
	}
	if fmt.Sprint(failed.calls) != "[inputs decided commit]" || len(cloud.Machines()) != 0 {
		t.Fatalf("a failed commit: calls %v, %d machines rented", failed.calls, len(cloud.Machines()))
	}

	ok := &recorder{}
	if err := Turn(ctx, st, cloud, t0, engine.Config{}, ok, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ok.calls) != "[inputs decided commit acquired]" {
		t.Errorf("calls %v", ok.calls)
	}
	if k := kinds(ok.acquired.Events); k != "lease.launched L1, lease.failed L2" || len(cloud.Machines()) != 1 {
		t.Errorf("acquired %q with %d machines", k, len(cloud.Machines()))
	}

	clk.Advance(2 * time.Minute)
	next := &recorder{}
	if err := Turn(ctx, st, cloud, clk.Now(), engine.Config{}, next, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if next.inputsSaw != core.LeaseReady {
		t.Errorf("inputs saw L1 %s: the provider's ready event comes first", next.inputsSaw)
	}
	ev := next.turned.Events
	if len(ev) < 3 || ev[0].Kind != "lease.ready" || ev[1].Kind != "input" || ev[len(ev)-1].Kind != "decided" {
		t.Errorf("committed events %q: want the provider's, the inputs', the step's, then Decided's", kinds(ev))
	}
	if !next.turned.Now.Equal(clk.Now()) {
		t.Errorf("Turned.Now %s, want %s", next.turned.Now, clk.Now())
	}
}
