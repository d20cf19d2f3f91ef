package sim

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from this run")

// TestGoldenTranscript replays a small workload under the gpufleet policy
// and compares every decision, with its reason, to the reviewed
// transcript in testdata. Run with -update after an intended change and
// read the diff.
func TestGoldenTranscript(t *testing.T) {
	w := &Workload{Actual: map[string]time.Duration{}}
	add := func(id string, tier core.Tier, at, est time.Duration, gpus int, milli core.Milli, interruptible bool) {
		j := &core.Job{ID: id, Team: "t" + id[:1], Tier: tier, Submit: t0.Add(at), EstDuration: est, Interruptible: interruptible,
			CheckpointInterval: 15 * time.Minute, Request: core.Request{GPUs: gpus, MilliPerGPU: milli}}
		w.Jobs = append(w.Jobs, j)
		w.Actual[id] = est
	}
	add("a-train", core.TierCore, 0, 3*time.Hour, 8, 1000, false)
	add("b-tune", core.TierRegular, 10*time.Minute, 90*time.Minute, 1, 1000, true)
	add("b-nb1", core.TierRegular, 15*time.Minute, 45*time.Minute, 1, 300, false)
	add("b-nb2", core.TierRegular, 16*time.Minute, 45*time.Minute, 1, 300, false)
	add("c-etl", core.TierOffline, 20*time.Minute, 2*time.Hour, 2, 1000, true)
	add("a-eval", core.TierCore, 2*time.Hour, 30*time.Minute, 1, 1000, false)
	var lines []string
	cfg := Config{Workload: w, Offers: testOffers(), Seed: 3, Provider: provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(2 * time.Minute)}},
		Transcript: func(e core.Event) {
			lines = append(lines, fmt.Sprintf("%s %-14s %-10s %s", e.At.Sub(t0), e.Kind, e.Subject, e.Reason))
		}}
	p, _ := policy.Preset("gpufleet")
	r, err := Run(context.Background(), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, fmt.Sprintf("cost %s, paid %d milli-GPU-s, allocated %d, unfinished %d", r.Cost, r.PaidMilliSec, r.AllocatedMilliSec, r.Unfinished))
	got := strings.Join(lines, "\n") + "\n"
	const path = "testdata/transcript.golden"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("transcript differs from %s (run with -update if intended):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing lines.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d\n- %s\n+ %s", i+1, a, b)
		}
	}
	return ""
}
