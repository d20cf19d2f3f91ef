package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/runner"
	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/server"
)

var t0 = time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)

// pgids is a PGIDFunc from a table.
func pgids(m map[int]int) PGIDFunc {
	return func(pid int) (int, bool) {
		pg, ok := m[pid]
		return pg, ok
	}
}

// ladderRun samples src every minute for the given minutes, feeds the
// fleet ladder and returns, per minute, the kinds of alerts raised.
func ladderRun(t *testing.T, c *clock.Manual, src gpu.Source, jobs []runner.Proc, pgidOf PGIDFunc, minutes int) map[int][]string {
	t.Helper()
	state := map[string]fleet.LadderState{}
	got := map[int][]string{}
	cfg := fleet.Config{}.Defaults()
	for m := 0; m <= minutes; m++ {
		if m > 0 {
			c.Advance(time.Minute)
		}
		readings, err := src.Sample(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var alerts []fleet.Alert
		state, alerts = fleet.Ladder(c.Now(), server.FleetReadings(Samples("L1", c.Now(), readings, jobs, pgidOf)), state, cfg)
		for _, a := range alerts {
			got[m] = append(got[m], a.Kind+" "+a.Unit)
			if a.Kind == "idle-alert" && !strings.Contains(a.Reason, "for 30m") {
				t.Errorf("minute %d: reason %q does not say 30m", m, a.Reason)
			}
		}
	}
	return got
}

// TestIdleJobRaisesAlertAtMinute30: a job whose process holds its GPU at
// 3% raises the idle alert at minute 30 and not before; its neighbour,
// busy, raises nothing.
func TestIdleJobRaisesAlertAtMinute30(t *testing.T) {
	c := clock.NewManual(t0)
	idle := gpu.Reading{Index: 0, UUID: "GPU-idle", UtilPct: 3, MemUsedMiB: 30000, ProcessesKnown: true, Processes: []gpu.Process{{PID: 501}}}
	busy := gpu.Reading{Index: 1, UUID: "GPU-busy", UtilPct: 96, MemUsedMiB: 70000, ProcessesKnown: true, Processes: []gpu.Process{{PID: 601}}}
	src := gpu.NewFake(c, gpu.Step{At: 0, Readings: []gpu.Reading{idle, busy}})
	jobs := []runner.Proc{{ID: "notebook", Team: "nlp", PGID: 500, GPUs: []string{"0"}}, {ID: "train", Team: "cv", PGID: 600, GPUs: []string{"GPU-busy"}}}
	got := ladderRun(t, c, src, jobs, pgids(map[int]int{501: 500, 601: 600}), 50)
	want := map[int][]string{30: {"idle-alert notebook"}, 45: {"idle-notify notebook"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("alerts by minute (-want +got)\n%s", d)
	}
}

// TestZombieWhenTheJobsProcessLeavesTheGPU: the job's leader lives on
// but its GPU process died at minute 5, leaving the GPU idle: a zombie at
// minute 15 (fleet's ZombieAfter, 10 minutes, later), once, and not
// before. The same GPU seen by a source that lists no processes is never
// a zombie, only idle.
func TestZombieWhenTheJobsProcessLeavesTheGPU(t *testing.T) {
	c := clock.NewManual(t0)
	working := gpu.Reading{Index: 0, UUID: "GPU-a", UtilPct: 90, ProcessesKnown: true, Processes: []gpu.Process{{PID: 701}}}
	gone := gpu.Reading{Index: 0, UUID: "GPU-a", UtilPct: 0, MemUsedMiB: 0, ProcessesKnown: true}
	src := gpu.NewFake(c, gpu.Step{At: 0, Readings: []gpu.Reading{working}}, gpu.Step{At: 5 * time.Minute, Readings: []gpu.Reading{gone}})
	jobs := []runner.Proc{{ID: "train", PGID: 700, GPUs: []string{"GPU-a"}}}
	got := ladderRun(t, c, src, jobs, pgids(map[int]int{701: 700}), 60)
	if d := cmp.Diff(map[int][]string{15: {"zombie train"}}, got); d != "" {
		t.Errorf("alerts by minute (-want +got)\n%s", d)
	}

	c = clock.NewManual(t0)
	blind := gone
	blind.ProcessesKnown = false
	src = gpu.NewFake(c, gpu.Step{At: 0, Readings: []gpu.Reading{working}}, gpu.Step{At: 5 * time.Minute, Readings: []gpu.Reading{blind}})
	got = ladderRun(t, c, src, jobs, pgids(map[int]int{701: 700}), 60)
	// The ladder's rule is the mean over the last 30 minutes with the
	// busiest 10% left out (fleet.IdleLow): the first 5 busy minutes are
	// mostly burst, so the first full window, at minute 30, is already low.
	if d := cmp.Diff(map[int][]string{30: {"idle-alert train"}, 45: {"idle-notify train"}}, got); d != "" {
		t.Errorf("without process lists: only the idle ladder (-want +got)\n%s", d)
	}
}

// TestZombieWhileAnotherGroupKeepsTheGPUBusy: a process of another group
// (a stray) keeps the GPU busy while the job's own process is gone. The
// zombie rule sees it from minute 5: first alert at minute 15. (fleet's
// Ladder then raises it again at every step, because a busy reading
// resets the rung: reported to fleet's owner, not asserted here.)
func TestZombieWhileAnotherGroupKeepsTheGPUBusy(t *testing.T) {
	c := clock.NewManual(t0)
	working := gpu.Reading{Index: 0, UUID: "GPU-a", UtilPct: 90, ProcessesKnown: true, Processes: []gpu.Process{{PID: 701}}}
	stray := gpu.Reading{Index: 0, UUID: "GPU-a", UtilPct: 90, ProcessesKnown: true, Processes: []gpu.Process{{PID: 999}}}
	src := gpu.NewFake(c, gpu.Step{At: 0, Readings: []gpu.Reading{working}}, gpu.Step{At: 5 * time.Minute, Readings: []gpu.Reading{stray}})
	jobs := []runner.Proc{{ID: "train", PGID: 700, GPUs: []string{"GPU-a"}}}
	got := ladderRun(t, c, src, jobs, pgids(map[int]int{701: 700, 999: 1}), 20)
	first := -1
	for m := 0; m <= 20; m++ {
		if len(got[m]) > 0 {
			first = m
			break
		}
	}
	if first != 15 || got[15][0] != "zombie train" {
		t.Errorf("first alert at minute %d (%v), want zombie train at 15", first, got[first])
	}
}

func TestSamplesAttributeProcessesByGroup(t *testing.T) {
	readings := []gpu.Reading{
		{Index: 0, UUID: "GPU-0", UtilPct: 50, ProcessesKnown: true, Processes: []gpu.Process{{PID: 11}, {PID: 12}, {PID: 21}}},
		{Index: 1, UUID: "GPU-1", UtilPct: gpu.Unknown, MIG: false},
		{Index: 1, UUID: "MIG-1a", MIG: true, ParentUUID: "GPU-1", UtilPct: 20, ProcessesKnown: true, Processes: []gpu.Process{{PID: 31}}},
	}
	jobs := []runner.Proc{
		{ID: "a", PGID: 10, GPUs: []string{"0"}},
		{ID: "b", PGID: 20, GPUs: []string{"GPU-0", "1"}},
		{ID: "c", PGID: 30, GPUs: []string{"MIG-1a"}},
	}
	ss := Samples("L9", t0, readings, jobs, pgids(map[int]int{11: 10, 12: 10, 21: 20, 31: 30}))
	var got []string
	for _, s := range ss {
		got = append(got, fmt.Sprintf("%s procs=%d jobs=%v", s.Device(), s.Processes, s.Jobs))
	}
	want := []string{
		"GPU-0 procs=3 jobs=[{a  2} {b  1}]",
		"GPU-1 procs=-1 jobs=[{b  -1}]",
		"MIG-1a procs=1 jobs=[{c  1}]",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	fr := server.FleetReadings(ss)
	var units []string
	for _, r := range fr {
		units = append(units, fmt.Sprintf("%s gpu%d util=%d noproc=%v", r.Unit, r.GPU, r.UtilPct, r.NoProcess))
	}
	// GPU 1's utilization is unknown: no reading, rather than a false idle.
	wantUnits := []string{"a gpu0 util=50 noproc=false", "b gpu0 util=50 noproc=false", "c gpu1 util=20 noproc=false"}
	if d := cmp.Diff(wantUnits, units); d != "" {
		t.Errorf("fleet readings (-want +got)\n%s", d)
	}
}

// TestSamplesWithARealProcessGroup runs a real job and checks the
// attribution with the real Getpgid: the job's own pid is its group's, a
// pid of another group is not.
func TestSamplesWithARealProcessGroup(t *testing.T) {
	r, err := runner.New(runner.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	j, err := r.Start(runner.Spec{ID: "real", Command: []string{"sleep", "1000"}, GPUs: []string{"0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		j.Kill("test over")
		<-j.Done()
	}()
	mine := gpu.Reading{Index: 0, UUID: "GPU-0", UtilPct: 1, ProcessesKnown: true, Processes: []gpu.Process{{PID: j.PGID()}}}
	other := gpu.Reading{Index: 0, UUID: "GPU-0", UtilPct: 1, ProcessesKnown: true, Processes: []gpu.Process{{PID: os.Getpid()}}}
	if s := Samples("L1", t0, []gpu.Reading{mine}, r.Running(), nil); s[0].Jobs[0].Processes != 1 {
		t.Errorf("the job's own process: %+v", s[0].Jobs)
	}
	if s := Samples("L1", t0, []gpu.Reading{other}, r.Running(), nil); s[0].Jobs[0].Processes != 0 {
		t.Errorf("the test's process (group %d): %+v", syscall.Getpgrp(), s[0].Jobs)
	}
}
