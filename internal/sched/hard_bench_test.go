package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The hard cases of admission and preemption, beside the plain ones in
// bench_test.go:
//
//	go test ./internal/sched -run '^$' -bench 'OverQuota|MixedVictims' -benchtime 3x

// BenchmarkAdmissionOverQuota: 2,000 team queues in 20 cohorts, each team
// guaranteed 8 A100s with up to 4 more borrowed from its cohort. Nine
// teams in ten already run their whole guarantee and queue about 54,000
// quarter-GPU units between them; the tenth team of each cohort runs and
// queues nothing, so every unit admitted borrows its unused quota, until
// the cohort's spare quota is gone. Reports admissions per second, and
// fails if nothing is admitted or a team ends past its guarantee and
// borrow limit together.
func BenchmarkAdmissionOverQuota(b *testing.B) {
	st := overQuota(2000, 20, 3000, 60000)
	var admitted int
	start := time.Now()
	for b.Loop() {
		d := Schedule(st, Config{NoPreemption: true, NoBackfill: true})
		if err := checkOverQuota(d, 20); err != nil {
			b.Fatal(err)
		}
		admitted += len(d.Placements)
	}
	el := time.Since(start)
	if admitted == 0 {
		b.Fatal("nothing admitted: the case is not exercised")
	}
	b.ReportMetric(float64(admitted)/el.Seconds(), "admissions/s")
	b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
}

// TestOverQuotaBorrowsCohortSpare is the benchmark's case small: each
// cohort's spare quota (its lender's 8 GPUs) is borrowed in full, a
// quarter GPU at a time, by busy teams, and no further.
func TestOverQuotaBorrowsCohortSpare(t *testing.T) {
	st := overQuota(40, 2, 60, 4000)
	d := Schedule(st, Config{NoPreemption: true, NoBackfill: true})
	if err := checkOverQuota(d, 2); err != nil {
		t.Fatal(err)
	}
	// Two cohorts of 20 teams, each with two lenders of 8,000 milli-GPUs:
	// 128 quarter GPUs in all.
	if got := len(d.Placements); got != 128 {
		t.Errorf("admitted %d quarter-GPU units, want 128 (two cohorts' spare 16 GPUs each)", got)
		for i, w := range d.Waiting {
			if i == 3 {
				break
			}
			t.Logf("waiting: %s: %s", w.Unit.Key(), w.Reason)
		}
	}
}

// overQuota builds the case: teamsN teams in cohorts, nodesN 8-GPU A100
// nodes, about pendingN quarter-GPU units drawn over the teams, of which
// the lenders' are dropped.
func overQuota(teamsN, cohorts, nodesN, pendingN int) *State {
	nodes := benchNodes(nodesN, 8)
	for i := range nodes {
		nodes[i].GPUModel = "A100"
	}
	var teams []core.Team
	for t := range teamsN {
		teams = append(teams, core.Team{ID: fmt.Sprintf("t%04d", t), Cohort: fmt.Sprintf("c%02d", t%cohorts), Weight: 1,
			Quotas: []core.Quota{{GPUClass: "A100", Guaranteed: 8000, BorrowLimit: 4000, LendLimit: -1}}})
	}
	// The busy teams' guarantee, running: one 8-GPU unit each on a node
	// of its own.
	var running []Allocation
	node := 0
	for t := range teamsN {
		if lender(t, cohorts) {
			continue
		}
		u := Unit{Job: &core.Job{ID: fmt.Sprintf("run-%04d", t), Team: fmt.Sprintf("t%04d", t), Tier: core.TierRegular,
			Request: core.Request{GPUs: 8, MilliPerGPU: core.WholeGPU}, Submit: benchNow.Add(-2 * time.Hour), EstDuration: 10 * time.Hour}}
		a := Allocation{Unit: u, Parts: []Part{{Node: node, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}, Start: benchNow.Add(-time.Hour)}
		apply(nodes, &a.Unit, a.Parts[0], 1)
		running = append(running, a)
		node++
	}
	var pending []Unit
	for _, u := range benchJobs(pendingN, teamsN, 2) {
		if lender(teamNo(u.Job.Team), cohorts) {
			continue // the lenders queue nothing: their quota is the cohort's to borrow
		}
		u.Job.Request = core.Request{GPUs: 1, MilliPerGPU: 250}
		pending = append(pending, u)
	}
	return &State{Now: benchNow, Nodes: nodes, Teams: teams, Running: running, Pending: pending}
}

// lender: one team in ten of each cohort (teams are dealt to cohorts in
// turn) runs and queues nothing.
func lender(team, cohorts int) bool { return team/cohorts%10 == 9 }

func teamNo(id string) int {
	var n int
	fmt.Sscanf(id, "t%04d", &n)
	return n
}

// checkOverQuota: every admitted unit is a busy team's (it borrows), and
// no team ends past its guarantee and borrow limit.
func checkOverQuota(d Decisions, cohorts int) error {
	used := map[string]int64{}
	for _, p := range d.Placements {
		if lender(teamNo(p.Unit.Job.Team), cohorts) {
			return fmt.Errorf("admitted %s of lender team %s, which queued nothing", p.Unit.Key(), p.Unit.Job.Team)
		}
		used[p.Unit.Job.Team] += int64(p.Unit.Job.Request.MilliPerGPU) * int64(p.Unit.Job.Request.GPUs)
	}
	for t, m := range used {
		if 8000+m > 8000+4000 {
			return fmt.Errorf("team %s holds %d milli-GPUs: past its guarantee 8000 and borrow limit 4000", t, 8000+m)
		}
	}
	return nil
}

// BenchmarkPreemptionMixedVictims: 2,000 full 8-GPU nodes of four models,
// each running interruptible offline victims of several shapes — a
// 4-GPU gang, a 2-GPU unit, a whole GPU and two GPUs shared by quarter-
// and half-GPU units — at several ages; 1,000 pending core units of 1, 2,
// 4 and 8 GPUs, some pinned to a model, each needing preemption. Reports
// decisions (a placement with its victims) per second and victims per
// decision.
func BenchmarkPreemptionMixedVictims(b *testing.B) {
	for _, bound := range []bool{true, false} {
		b.Run(map[bool]string{true: "need-bound", false: "no-need-bound"}[bound], func(b *testing.B) {
			was := preemptNeedBound
			preemptNeedBound = bound
			defer func() { preemptNeedBound = was }()
			benchPreemption(b, mixedVictims(2000, 1000))
		})
	}
}

// mixedVictims is BenchmarkPreemptionMixedVictims's state: nodes full
// 8-GPU nodes and pending core units.
func mixedVictims(nodeCount, pendingCount int) *State {
	nodes := benchNodes(nodeCount, 8)
	var running []Allocation
	add := func(n int, id string, r core.Request, gpus []int, age time.Duration) {
		u := Unit{Job: &core.Job{ID: id, Team: "batch", Tier: core.TierOffline, Interruptible: true, Request: r, CheckpointInterval: 20 * time.Minute}}
		a := Allocation{Unit: u, Parts: []Part{{Node: n, GPUs: gpus}}, Start: benchNow.Add(-age)}
		apply(nodes, &a.Unit, a.Parts[0], 1)
		running = append(running, a)
	}
	whole := func(g int) core.Request { return core.Request{GPUs: g, MilliPerGPU: core.WholeGPU} }
	for n := range nodes {
		age := func(k int) time.Duration { return time.Duration(1+(n*7+k*13)%300) * time.Minute }
		add(n, fmt.Sprintf("gang-%d", n), whole(4), []int{0, 1, 2, 3}, age(0))
		add(n, fmt.Sprintf("pair-%d", n), whole(2), []int{4, 5}, age(1))
		add(n, fmt.Sprintf("one-%d", n), whole(1), []int{6}, age(2))
		for k, m := range []core.Milli{250, 250, 500} {
			add(n, fmt.Sprintf("frac-%d-%d", n, k), core.Request{GPUs: 1, MilliPerGPU: m, MemMiB: 8192}, []int{7}, age(3+k))
		}
	}
	var pending []Unit
	models := []string{"", "H100", "", "A100"}
	for i := range pendingCount {
		j := &core.Job{ID: fmt.Sprintf("core-%d", i), Team: "ml", Tier: core.TierCore, Request: whole([]int{1, 2, 4, 8}[i%4]), Submit: benchNow}
		if m := models[i%len(models)]; m != "" {
			j.Request.Models = []string{m}
		}
		pending = append(pending, Unit{Job: j})
	}
	return &State{Now: benchNow, Nodes: nodes, Running: running, Pending: pending}
}

func benchPreemption(b *testing.B, st *State) {
	var decided, victims int
	start := time.Now()
	for b.Loop() {
		d := Schedule(st, Config{NoBackfill: true})
		decided += len(d.Placements)
		victims += len(d.Preemptions)
	}
	el := time.Since(start)
	if decided == 0 {
		b.Fatal("no placement: the case is not exercised")
	}
	b.ReportMetric(float64(decided)/el.Seconds(), "decisions/s")
	b.ReportMetric(float64(victims)/float64(decided), "victims/decision")
}
