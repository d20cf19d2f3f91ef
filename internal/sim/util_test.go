package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/gpuutil"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// With a utilization series, busy GPU-hours are the allocated ones
// weighted by it; jobs without one count busy; and the idle ladder alerts
// on the bursty-idle jobs, which the replay without series never sees.
func TestUtilSeriesBusyAndLadder(t *testing.T) {
	w := burstyWorkload(5)
	var b strings.Builder
	b.WriteString("id,time,utilization\n")
	bursty := 0
	for i, j := range w.Jobs {
		if i%3 == 2 {
			continue // no series: counted busy
		}
		if i%3 == 0 { // 0% with a 3-minute burst every 15 minutes
			bursty++
			for s := 0; s < int(w.Actual[j.ID]/time.Second); s += 15 * 60 {
				fmt.Fprintf(&b, "%s,%d,100%%\n%s,%d,0\n", j.ID, s, j.ID, s+180)
			}
			continue
		}
		fmt.Fprintf(&b, "%s,0,0.8\n", j.ID)
	}
	u, err := gpuutil.Parse("u.csv", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := policy.Preset("gpufleet")
	plain, err := Run(context.Background(), testConfig(w), p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(w)
	cfg.Util = u
	got, err := Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if plain.BusyMilliSec != 0 || plain.IdleAlerts != nil {
		t.Errorf("without series: busy %d, alerts %v; want none", plain.BusyMilliSec, plain.IdleAlerts)
	}
	if got.UtilMissingJobs != 100 {
		t.Errorf("%d jobs without a series, want 100", got.UtilMissingJobs)
	}
	if got.BusyMilliSec <= 0 || got.BusyMilliSec >= got.AllocatedMilliSec*9/10 {
		t.Errorf("busy %d of %d allocated milli-GPU-seconds: want well under it", got.BusyMilliSec, got.AllocatedMilliSec)
	}
	if got.IdleAlerts["idle-alert"] == 0 {
		t.Errorf("idle alerts %v: want some for the %d bursty-idle jobs", got.IdleAlerts, bursty)
	}
	t.Logf("busy %.0f of %.0f allocated GPU-h; ladder %v", float64(got.BusyMilliSec)/3.6e6, float64(got.AllocatedMilliSec)/3.6e6, got.IdleAlerts)
}

func TestBehindUniform(t *testing.T) {
	j := &core.Job{Submit: t0, Deadline: t0.Add(10 * time.Hour), EstDuration: 5 * time.Hour}
	for _, tc := range []struct {
		done, at time.Duration
		want     bool
	}{
		{0, 0, false},                     // nothing expected yet
		{0, time.Hour, true},              // 0 done, 0.5 h expected
		{time.Hour, 2 * time.Hour, false}, // on the line
		{time.Hour, 3 * time.Hour, true},  // 1.5 h expected
		{5 * time.Hour, 9 * time.Hour, false},
		{5 * time.Hour, 10 * time.Hour, true}, // at the deadline: on demand
	} {
		u := &engine.Unit{Done: tc.done}
		u.Job = j
		if got := behindUniform(u, 0, t0.Add(tc.at)); got != tc.want {
			t.Errorf("done %v at +%v: behind %v, want %v", tc.done, tc.at, got, tc.want)
		}
	}
}

// Uniform Progress keeps deadline work on spot while it is ahead: on a
// workload of interruptible deadline jobs it rents spot, and it decides
// the same on every run of one seed.
func TestUniformProgressBaseline(t *testing.T) {
	w := burstyWorkload(9)
	for _, j := range w.Jobs {
		j.Deadline = j.Submit.Add(3 * j.EstDuration)
	}
	p, _ := policy.Preset("gpufleet")
	p.Name, p.Spot.Rule = "up", policy.SpotUniformProgress
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := Run(context.Background(), testConfig(w), p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), testConfig(w), p)
	if err != nil {
		t.Fatal(err)
	}
	if a.Cost != b.Cost || a.DeadlineMisses != b.DeadlineMisses {
		t.Errorf("two runs: %v/%d and %v/%d", a.Cost, a.DeadlineMisses, b.Cost, b.DeadlineMisses)
	}
	if a.CostByMode[core.Spot] == 0 {
		t.Errorf("no spot rented under uniform progress: %v", a.CostByMode)
	}
	t.Logf("uniform progress: cost %s (spot %s), %d deadline misses, %d reclaims", a.Cost, a.CostByMode[core.Spot], a.DeadlineMisses, a.Reclaims)
}
