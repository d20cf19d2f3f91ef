package sched

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// jobB builds a job for the deadline tests: one whole A100 GPU, regular
// tier, team "a", submitted at now, unless told otherwise.
type jobB struct{ j *core.Job }

func dlJob(id string, now time.Time) jobB {
	return jobB{&core.Job{ID: id, Team: "a", Tier: core.TierRegular, Submit: now,
		Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU, Models: []string{"A100"}}}}
}
func (b jobB) team(t string) jobB               { b.j.Team = t; return b }
func (b jobB) tier(t core.Tier) jobB            { b.j.Tier = t; return b }
func (b jobB) submit(at time.Time) jobB         { b.j.Submit = at; return b }
func (b jobB) est(d time.Duration) jobB         { b.j.EstDuration = d; return b }
func (b jobB) deadline(at time.Time) jobB       { b.j.Deadline = at; return b }
func (b jobB) interruptible() jobB              { b.j.Interruptible = true; return b }
func (b jobB) checkpoints(d time.Duration) jobB { b.j.CheckpointInterval = d; return b }
func (b jobB) unit() Unit                       { return Unit{Job: b.j} }

// a100s is n one-GPU A100 nodes.
func a100s(n int) []core.Node {
	var out []core.Node
	for i := range n {
		out = append(out, core.Node{LeaseID: fmt.Sprintf("n%d", i), GPUModel: "A100", GPUMemMiB: 40960,
			GPUs: []core.GPU{{Index: 0, FreeMilli: core.WholeGPU, FreeMemMiB: 40960}}})
	}
	return out
}

func placedKeys(d Decisions) []string {
	var out []string
	for _, p := range d.Placements {
		out = append(out, p.Unit.Key())
	}
	sort.Strings(out)
	return out
}

func TestDeadlineOrder(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	for _, tc := range []struct {
		name    string
		nodes   int
		pending []Unit
		info    []Waiting
		history map[string]Usage
		cfg     Config
		want    []string // placed
	}{
		{name: "earliest deadline first across teams, whatever the submission order",
			nodes: 1,
			pending: []Unit{
				dlJob("late", now).submit(now.Add(-30 * time.Minute)).est(h).deadline(now.Add(10 * h)).unit(),
				dlJob("soon", now).team("b").est(h).deadline(now.Add(5 * h)).unit(),
			},
			want: []string{"soon"}},
		{name: "deadline work before work without one",
			nodes: 1,
			pending: []Unit{
				dlJob("plain", now).submit(now.Add(-30 * time.Minute)).est(h).unit(),
				dlJob("dated", now).est(h).deadline(now.Add(20 * h)).unit(),
			},
			want: []string{"dated"}},
		{name: "at risk ahead of an earlier deadline: least slack first",
			nodes: 1,
			pending: []Unit{
				dlJob("short", now).est(10 * time.Minute).deadline(now.Add(2 * h)).unit(),
				dlJob("long", now).est(5 * h).deadline(now.Add(5*h + 5*time.Minute)).unit(),
			},
			want: []string{"long"}},
		{name: "done work counts: a resumed unit has slack again",
			nodes: 1,
			pending: []Unit{
				dlJob("short", now).est(10 * time.Minute).deadline(now.Add(2 * h)).unit(),
				dlJob("long", now).est(5 * h).deadline(now.Add(5*h + 5*time.Minute)).unit(),
			},
			info: []Waiting{{}, {Done: 4 * h}},
			want: []string{"short"}},
		{name: "a wait near its p99 target goes ahead of fair share",
			nodes: 1,
			pending: []Unit{
				dlJob("heavy", now).team("heavy").submit(now.Add(-55 * time.Minute)).unit(),
				dlJob("light", now).team("light").unit(),
			},
			history: map[string]Usage{"heavy": {"A100": 1_000_000_000}},
			want:    []string{"heavy"}},
		{name: "the wait counts from the requeue (Since), not the submission",
			nodes: 1,
			pending: []Unit{
				dlJob("heavy", now).team("heavy").submit(now.Add(-55 * time.Minute)).unit(),
				dlJob("light", now).team("light").unit(),
			},
			info:    []Waiting{{Since: now.Add(-time.Minute)}, {}},
			history: map[string]Usage{"heavy": {"A100": 1_000_000_000}},
			want:    []string{"light"}},
		{name: "without deadline order: fair share, then age",
			nodes: 1,
			pending: []Unit{
				dlJob("late", now).submit(now.Add(-30 * time.Minute)).est(h).deadline(now.Add(10 * h)).unit(),
				dlJob("soon", now).est(h).deadline(now.Add(5 * h)).unit(),
			},
			cfg:  Config{NoDeadlines: true},
			want: []string{"late"}},
		{name: "tiers still come first: an at-risk regular unit waits for core",
			nodes: 1,
			pending: []Unit{
				dlJob("risky", now).est(5 * h).deadline(now.Add(5 * h)).unit(),
				dlJob("core", now).tier(core.TierCore).unit(),
			},
			want: []string{"core"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &State{Now: now, Nodes: a100s(tc.nodes), Pending: tc.pending, PendingInfo: tc.info, History: tc.history,
				Teams: []core.Team{{ID: "a"}, {ID: "b"}, {ID: "heavy"}, {ID: "light"}}}
			d := Schedule(st, tc.cfg)
			if diff := cmp.Diff(tc.want, placedKeys(d)); diff != "" {
				t.Errorf("placed (-want +got):\n%s\nreasons: %v", diff, reasons(d))
			}
		})
	}
}

func TestLatestStartAndRisk(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	cfg := Config{}.Defaults() // regular p99 1h, lead 8m, default duration 1h
	for _, tc := range []struct {
		name   string
		j      *core.Job
		w      Waiting
		want   time.Time
		ok     bool
		atRisk bool
	}{
		{"no deadline: the wait target", dlJob("a", now).j, Waiting{}, now.Add(time.Hour), true, false},
		{"deadline less the estimate", dlJob("a", now).est(2 * time.Hour).deadline(now.Add(150 * time.Minute)).j, Waiting{}, now.Add(30 * time.Minute), true, false},
		{"no estimate: the default duration", dlJob("a", now).deadline(now.Add(65 * time.Minute)).j, Waiting{}, now.Add(5 * time.Minute), true, true},
		{"done work shortens the rest", dlJob("a", now).est(2 * time.Hour).deadline(now.Add(150 * time.Minute)).j, Waiting{Done: time.Hour}, now.Add(time.Hour), true, false},
		{"the earlier of deadline and wait target", dlJob("a", now).submit(now.Add(-58 * time.Minute)).est(time.Hour).deadline(now.Add(5 * time.Hour)).j, Waiting{}, now.Add(2 * time.Minute), true, true},
		{"a tier without a target and no deadline", dlJob("a", now).tier("other").j, Waiting{}, time.Time{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := LatestStart(tc.j, tc.w, cfg)
			if ok != tc.ok || !at.Equal(tc.want) {
				t.Errorf("LatestStart = %s, %v; want %s, %v", at, ok, tc.want, tc.ok)
			}
			if got := AtRisk(at, ok, now, cfg); got != tc.atRisk {
				t.Errorf("AtRisk = %v; want %v", got, tc.atRisk)
			}
		})
	}
}

// A running offline unit whose deadline would be at risk if it restarted
// from its checkpoint is not preempted; one with slack is.
func TestPreemptionKeepsDeadlines(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	for _, tc := range []struct {
		name    string
		victim  *core.Job
		cfg     Config
		preempt bool
	}{
		{"slack enough to restart", dlJob("v", now).tier(core.TierOffline).interruptible().est(2 * h).deadline(now.Add(6 * h)).j, Config{}, true},
		{"restart would put the deadline at risk", dlJob("v", now).tier(core.TierOffline).interruptible().est(2 * h).deadline(now.Add(2 * h)).j, Config{}, false},
		{"periodic checkpoints: little is lost, slack is kept", dlJob("v", now).tier(core.TierOffline).interruptible().checkpoints(10 * time.Minute).est(2 * h).deadline(now.Add(2 * h)).j, Config{}, true},
		{"the baselines preempt regardless", dlJob("v", now).tier(core.TierOffline).interruptible().est(2 * h).deadline(now.Add(2 * h)).j, Config{NoDeadlines: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := a100s(1)
			nodes[0].GPUs[0].FreeMilli, nodes[0].GPUs[0].FreeMemMiB = 0, 0
			// Running for an hour; the victim's estimate counts from its start.
			tc.victim.Submit = now.Add(-2 * h)
			run := Allocation{Unit: Unit{Job: tc.victim}, Parts: []Part{{Node: 0, GPUs: []int{0}}}, Start: now.Add(-h)}
			st := &State{Now: now, Nodes: nodes, Running: []Allocation{run}, Teams: []core.Team{{ID: "a"}},
				Pending: []Unit{dlJob("core", now).tier(core.TierCore).unit()}}
			d := Schedule(st, tc.cfg)
			if got := len(d.Preemptions) == 1; got != tc.preempt {
				t.Errorf("preempted = %v; want %v (reasons %v)", got, tc.preempt, reasons(d))
			}
		})
	}
}

// prio is the deadline order written out again: at-risk units (class 0)
// by latest start, then units with a deadline (1) by deadline, then the
// rest (2).
func prio(u Unit, w Waiting, now time.Time, cfg Config) (int, time.Time) {
	at, ok := LatestStart(u.Job, w, cfg)
	switch {
	case AtRisk(at, ok, now, cfg):
		return 0, at
	case !u.Job.Deadline.IsZero():
		return 1, u.Job.Deadline
	}
	return 2, time.Time{}
}

// TestPropertyNoStarvationByLaterDeadlines: in a pass over units that
// all ask for the same (one whole GPU, no quotas), no unit waits while a
// unit of its tier that comes after it in the deadline order is placed:
// a job with slack left is never passed over for later-deadline work of
// its tier, and at-risk work goes first.
func TestPropertyNoStarvationByLaterDeadlines(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
		cfg := Config{}.Defaults()
		var pending []Unit
		var info []Waiting
		for i, n := 0, rapid.IntRange(1, 30).Draw(t, "jobs"); i < n; i++ {
			b := dlJob(fmt.Sprintf("j%d", i), now).team(rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "team")).
				tier(rapid.SampledFrom([]core.Tier{core.TierCore, core.TierRegular, core.TierOffline}).Draw(t, "tier")).
				submit(now.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "age")) * time.Minute)).
				est(time.Duration(rapid.IntRange(0, 600).Draw(t, "est")) * time.Minute)
			if rapid.Bool().Draw(t, "dated") {
				b = b.deadline(now.Add(time.Duration(rapid.IntRange(-60, 1200).Draw(t, "deadline")) * time.Minute))
			}
			pending = append(pending, b.unit())
			info = append(info, Waiting{Since: b.j.Submit.Add(time.Duration(rapid.IntRange(0, 60).Draw(t, "requeued")) * time.Minute),
				Done: time.Duration(rapid.IntRange(0, 120).Draw(t, "done")) * time.Minute})
		}
		st := &State{Now: now, Nodes: a100s(rapid.IntRange(0, 12).Draw(t, "nodes")), Pending: pending, PendingInfo: info,
			Teams:   []core.Team{{ID: "a"}, {ID: "b", Weight: 2}, {ID: "c"}},
			History: map[string]Usage{"a": {"A100": int64(rapid.IntRange(0, 1<<30).Draw(t, "hist"))}}}
		d := Schedule(st, Config{})
		placed := map[Unit]bool{}
		for _, p := range d.Placements {
			placed[p.Unit] = true
		}
		for i, a := range pending {
			if placed[a] {
				continue
			}
			ca, ta := prio(a, info[i], now, cfg)
			for k, b := range pending {
				if !placed[b] || b.Job.Tier != a.Job.Tier {
					continue
				}
				cb, tb := prio(b, info[k], now, cfg)
				if ca < cb || ca == cb && ca < 2 && ta.Before(tb) {
					t.Fatalf("%s (class %d at %s) waits while %s (class %d at %s) of tier %s was placed", a.Key(), ca, ta, b.Key(), cb, tb, a.Job.Tier)
				}
			}
		}
	})
}
