package sched

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Scenarios are data: testdata/scenarios/*.json each hold nodes, teams,
// running and pending jobs, and the decisions expected.

type scNode struct {
	ID        string `json:"id"`
	Model     string `json:"model"`
	GPUs      int    `json:"gpus"`
	MemGiB    int64  `json:"mem_gib"`
	Cost      string `json:"cost"`
	Committed bool   `json:"committed"`
	Spot      bool   `json:"spot"`
}

type scJob struct {
	ID            string           `json:"id"`
	Team          string           `json:"team"`
	Tier          core.Tier        `json:"tier"`
	GPUs          int              `json:"gpus"`
	Milli         core.Milli       `json:"milli"`
	MemMiB        int64            `json:"mem_mib"`
	Models        []string         `json:"models"`
	Throughput    map[string]int64 `json:"throughput"`
	Shards        int              `json:"shards"`
	Est           string           `json:"est"`
	Deadline      string           `json:"deadline"`
	Interruptible bool             `json:"interruptible"`
	Deferrable    bool             `json:"deferrable"`
	Submit        string           `json:"submit"`
	// Done, for a pending job, is the work it resumes from ("4h").
	Done string `json:"done"`
}

type scRunning struct {
	Job        scJob  `json:"job"`
	Shard      int    `json:"shard"`
	Node       string `json:"node"`
	GPUs       []int  `json:"gpus"`
	Start      string `json:"start"`
	Checkpoint string `json:"checkpoint"`
	// Done is the work saved before this run started ("8h").
	Done string `json:"done"`
}

type scTeam struct {
	ID     string       `json:"id"`
	Cohort string       `json:"cohort"`
	Weight int64        `json:"weight"`
	Budget string       `json:"budget"`
	Spent  string       `json:"spent"`
	Quotas []core.Quota `json:"quotas"`
	// History is decayed milli-GPU-seconds per class.
	History map[string]int64 `json:"history"`
}

type scWant struct {
	// Placed maps unit key to "node" or "node:gpu,gpu".
	Placed    map[string]string `json:"placed"`
	Preempted []string          `json:"preempted"`
	Deferred  map[string]string `json:"deferred"`
	Reserved  map[string]string `json:"reserved"`
	// Waiting lists unit keys left pending; WaitReason substrings by key.
	Waiting    []string          `json:"waiting"`
	WaitReason map[string]string `json:"wait_reason"`
	// PlacedCount, when set, replaces Placed with a count (large arrays).
	PlacedCount *int `json:"placed_count"`
	// NodesUsed counts distinct nodes with placements.
	NodesUsed *int `json:"nodes_used"`
}

type scenario struct {
	Name      string      `json:"name"`
	Now       string      `json:"now"`
	Nodes     []scNode    `json:"nodes"`
	Teams     []scTeam    `json:"teams"`
	Running   []scRunning `json:"running"`
	Pending   []scJob     `json:"pending"`
	TimeOfUse *struct {
		Zone    string `json:"zone"`
		Windows []struct {
			Start, End int
			Mult       int64
		} `json:"windows"`
	} `json:"time_of_use"`
	Config struct {
		MinRuntime string `json:"min_runtime"`
	} `json:"config"`
	Want scWant `json:"want"`
}

// mustTime parses an RFC 3339 time, or "+2h"/"-5m" relative to now; an
// empty string gives def.
func mustTime(t *testing.T, s string, now, def time.Time) time.Time {
	if s == "" {
		return def
	}
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return now.Add(d)
	}
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// mustDuration parses a duration ("8h"); an empty string is zero.
func mustDuration(t *testing.T, s string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (j scJob) build(t *testing.T, now time.Time) *core.Job {
	job := &core.Job{ID: j.ID, Team: j.Team, Tier: j.Tier, Shards: j.Shards, Interruptible: j.Interruptible, Deferrable: j.Deferrable,
		Request: core.Request{GPUs: j.GPUs, MilliPerGPU: j.Milli, MemPerGPUMiB: j.MemMiB, Models: j.Models, Throughput: j.Throughput}}
	if job.Tier == "" {
		job.Tier = core.TierRegular
	}
	if job.Request.GPUs == 0 {
		job.Request.GPUs = 1
	}
	if job.Request.MilliPerGPU == 0 {
		job.Request.MilliPerGPU = core.WholeGPU
	}
	job.EstDuration = mustDuration(t, j.Est)
	job.Submit = mustTime(t, j.Submit, now, now.Add(-time.Minute))
	if j.Deadline != "" {
		job.Deadline = mustTime(t, j.Deadline, now, now)
	}
	if err := job.Validate(); err != nil {
		t.Fatalf("scenario job %s: %v", j.ID, err)
	}
	return job
}

func (sc *scenario) state(t *testing.T) (*State, Config, map[string]int) {
	def := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	now := mustTime(t, sc.Now, def, def)
	st := &State{Now: now, History: map[string]Usage{}, Spent: map[string]core.Micros{}}
	byID := map[string]int{}
	for i, n := range sc.Nodes {
		node := core.Node{LeaseID: n.ID, GPUModel: n.Model, GPUMemMiB: n.MemGiB * 1024, Committed: n.Committed, Spot: n.Spot}
		if n.MemGiB == 0 {
			node.GPUMemMiB = 80 * 1024
		}
		for g := 0; g < n.GPUs; g++ {
			node.GPUs = append(node.GPUs, core.GPU{Index: g, FreeMilli: core.WholeGPU, FreeMemMiB: node.GPUMemMiB})
		}
		st.Nodes = append(st.Nodes, node)
		cost := core.Micros(0)
		if n.Cost != "" {
			c, err := core.ParseMicros(n.Cost)
			if err != nil {
				t.Fatal(err)
			}
			cost = c
		}
		st.NodeCost = append(st.NodeCost, cost)
		byID[n.ID] = i
	}
	for _, tm := range sc.Teams {
		team := core.Team{ID: tm.ID, Cohort: tm.Cohort, Weight: tm.Weight, Quotas: tm.Quotas}
		if tm.Budget != "" {
			team.MonthlyBudget, _ = core.ParseMicros(tm.Budget)
		}
		if tm.Spent != "" {
			st.Spent[tm.ID], _ = core.ParseMicros(tm.Spent)
		}
		st.Teams = append(st.Teams, team)
		if tm.History != nil {
			st.History[tm.ID] = Usage(tm.History)
		}
	}
	for _, r := range sc.Running {
		a := Allocation{Unit: Unit{Job: r.Job.build(t, now), Shard: r.Shard}, Parts: []Part{{Node: byID[r.Node], GPUs: r.GPUs}},
			Start: mustTime(t, r.Start, now, now.Add(-time.Hour))}
		if r.Checkpoint != "" {
			a.LastCheckpoint = mustTime(t, r.Checkpoint, now, now)
		}
		a.Done = mustDuration(t, r.Done)
		apply(st.Nodes, &a.Unit, a.Parts[0], 1)
		st.Running = append(st.Running, a)
	}
	for _, j := range sc.Pending {
		job := j.build(t, now)
		n := max(job.Shards, 1)
		w := Waiting{Done: mustDuration(t, j.Done)}
		for s := 0; s < n; s++ {
			st.Pending = append(st.Pending, Unit{Job: job, Shard: s})
			st.PendingInfo = append(st.PendingInfo, w)
		}
	}
	if tou := sc.TimeOfUse; tou != nil {
		loc, err := time.LoadLocation(tou.Zone)
		if err != nil {
			t.Fatal(err)
		}
		st.TimeOfUse = &core.TimeOfUse{Location: loc}
		for _, w := range tou.Windows {
			st.TimeOfUse.Windows = append(st.TimeOfUse.Windows, core.Window{Weekdays: []time.Weekday{0, 1, 2, 3, 4, 5, 6}, StartHour: w.Start, EndHour: w.End, MultiplierBP: w.Mult})
		}
	}
	var cfg Config
	if sc.Config.MinRuntime != "" {
		cfg.MinRuntime, _ = time.ParseDuration(sc.Config.MinRuntime)
	}
	return st, cfg, byID
}

func partsText(st *State, parts []Part) string {
	var s []string
	for _, p := range parts {
		var gs []string
		for _, g := range p.GPUs {
			gs = append(gs, strconv.Itoa(g))
		}
		s = append(s, st.Nodes[p.Node].LeaseID+":"+strings.Join(gs, ","))
	}
	return strings.Join(s, "+")
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var sc scenario
			dec := json.NewDecoder(strings.NewReader(string(data)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&sc); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			st, cfg, _ := sc.state(t)
			d := Schedule(st, cfg)
			checkDecisions(t, st, d)
			w := sc.Want
			placed := map[string]string{}
			nodes := map[int]bool{}
			for _, p := range d.Placements {
				text := partsText(st, p.Parts)
				placed[p.Unit.Key()] = text
				for _, part := range p.Parts {
					nodes[part.Node] = true
				}
			}
			if w.PlacedCount != nil {
				if len(d.Placements) != *w.PlacedCount {
					t.Errorf("%d placements, want %d", len(d.Placements), *w.PlacedCount)
				}
			} else {
				got := map[string]string{}
				for k, v := range placed {
					want, ok := w.Placed[k]
					if ok && !strings.Contains(want, ":") {
						v = strings.Split(v, ":")[0] // only the node is asserted
					}
					got[k] = v
				}
				if diff := cmp.Diff(orEmpty(w.Placed), got); diff != "" {
					t.Errorf("placements (-want +got):\n%s\nreasons: %v", diff, reasons(d))
				}
			}
			if w.NodesUsed != nil && len(nodes) != *w.NodesUsed {
				t.Errorf("%d nodes used, want %d", len(nodes), *w.NodesUsed)
			}
			var pre []string
			for _, p := range d.Preemptions {
				pre = append(pre, p.Victim.Key())
			}
			sort.Strings(pre)
			if diff := cmp.Diff(sorted(w.Preempted), pre); diff != "" {
				t.Errorf("preemptions (-want +got):\n%s", diff)
			}
			deferred := map[string]string{}
			for _, df := range d.Deferrals {
				deferred[df.Unit.Key()] = df.Until.UTC().Format(time.RFC3339)
			}
			if diff := cmp.Diff(orEmpty(w.Deferred), deferred); diff != "" {
				t.Errorf("deferrals (-want +got):\n%s", diff)
			}
			reserved := map[string]string{}
			for _, r := range d.Reservations {
				reserved[r.Unit.Key()] = st.Nodes[r.Node].LeaseID + "@" + r.At.UTC().Format(time.RFC3339)
			}
			if diff := cmp.Diff(orEmpty(w.Reserved), reserved); diff != "" {
				t.Errorf("reservations (-want +got):\n%s", diff)
			}
			if w.PlacedCount == nil {
				var waiting []string
				for _, wt := range d.Waiting {
					waiting = append(waiting, wt.Unit.Key())
					if sub, ok := w.WaitReason[wt.Unit.Key()]; ok && !strings.Contains(wt.Reason, sub) {
						t.Errorf("%s waits because %q, want it to mention %q", wt.Unit.Key(), wt.Reason, sub)
					}
				}
				sort.Strings(waiting)
				if diff := cmp.Diff(sorted(w.Waiting), waiting); diff != "" {
					t.Errorf("waiting (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func reasons(d Decisions) []string {
	var out []string
	for _, p := range d.Placements {
		out = append(out, p.Unit.Key()+": "+p.Reason)
	}
	for _, w := range d.Waiting {
		out = append(out, w.Unit.Key()+" waits: "+w.Reason)
	}
	return out
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// checkDecisions asserts the invariants every decision set must hold:
// every pending unit decided exactly once, no GPU over-allocated after
// preemptions and placements, every decision with a reason, preemption
// only of interruptible non-core work.
// fataler is what checkDecisions needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

func checkDecisions(t fataler, st *State, d Decisions) {
	t.Helper()
	seen := map[string]int{}
	for _, p := range d.Placements {
		seen[p.Unit.Key()]++
		if p.Reason == "" {
			t.Errorf("placement of %s has no reason", p.Unit.Key())
		}
	}
	for _, w := range d.Waiting {
		seen[w.Unit.Key()]++
		if w.Reason == "" {
			t.Errorf("%s waits with no reason", w.Unit.Key())
		}
	}
	for _, df := range d.Deferrals {
		seen[df.Unit.Key()]++
		if !df.Until.After(st.Now) {
			t.Errorf("%s deferred to %v, not after now", df.Unit.Key(), df.Until)
		}
		if dl := df.Unit.Job.Deadline; !dl.IsZero() && df.Until.Add(df.Unit.Job.EstDuration).After(dl) {
			t.Errorf("%s deferred past its deadline", df.Unit.Key())
		}
	}
	for _, u := range st.Pending {
		if seen[u.Key()] != 1 {
			t.Errorf("unit %s decided %d times", u.Key(), seen[u.Key()])
		}
	}
	nodes := make([]core.Node, len(st.Nodes))
	for i := range st.Nodes {
		nodes[i] = st.Nodes[i]
		nodes[i].GPUs = append([]core.GPU(nil), st.Nodes[i].GPUs...)
	}
	for _, p := range d.Preemptions {
		v := p.Victim
		if v.Job.Tier == core.TierCore || !v.Job.Interruptible {
			t.Errorf("preempted %s: tier %s interruptible %v", v.Key(), v.Job.Tier, v.Job.Interruptible)
		}
		if p.Reason == "" {
			t.Errorf("preemption of %s has no reason", v.Key())
		}
		for _, part := range v.Parts {
			apply(nodes, &v.Unit, part, -1)
		}
	}
	for _, p := range d.Placements {
		for _, part := range p.Parts {
			for _, g := range part.GPUs {
				if !gpuFits(&nodes[part.Node], g, &p.Unit.Job.Request) {
					t.Fatalf("%s placed on %s GPU %d which cannot take it", p.Unit.Key(), nodes[part.Node].LeaseID, g)
				}
			}
			apply(nodes, &p.Unit, part, 1) // panics on over-allocation
		}
	}
}
