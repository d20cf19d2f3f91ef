package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// TestDecisionHash replays a fixed synthetic trace (3,000 jobs, the demo
// catalog, seed 1) under every policy and hashes everything the run
// decided and measured: each event in order (time, kind, subject and
// reason, so every placement's start time and machine choice is in it),
// the bill in micros by mode, the GPU-time counters, waits and the time
// series. Performance work must leave the hashes unchanged; a change of
// policy changes them on purpose, and then -update rewrites
// testdata/decisions.hash (read the golden transcript's diff to see why).
func TestDecisionHash(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 3,000 jobs under four policies")
	}
	gc := trace.DefaultGenConfig()
	gc.Jobs = 3000
	cfg := benchConfig(traceWorkload(t, trace.Generate(gc, 1), pricing.Demo().Offers))
	var lines []string
	for _, name := range policy.PresetNames {
		p, err := policy.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		c := cfg
		c.Transcript = func(e core.Event) {
			fmt.Fprintf(h, "%d %s %s %s\n", e.At.UnixNano(), e.Kind, e.Subject, e.Reason)
		}
		r, err := Run(context.Background(), c, p)
		if err != nil {
			t.Fatal(err)
		}
		hashResult(h, r)
		lines = append(lines, fmt.Sprintf("%s %s events=%d steps=%d cost=%d", name, hex.EncodeToString(h.Sum(nil)), r.Events, r.Steps, r.Cost))
	}
	got := strings.Join(lines, "\n") + "\n"
	const path = "testdata/decisions.hash"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("decisions differ from %s (run with -update only after an intended policy change):\n%s", path, lineDiff(string(want), got))
	}
}

// hashResult writes r's measured figures to h in a fixed order (maps by
// sorted key).
func hashResult(h hash.Hash, r *Result) {
	fmt.Fprintf(h, "cost %d idle %d paid %d alloc %d lost %d\n", r.Cost, r.IdleCost, r.PaidMilliSec, r.AllocatedMilliSec, r.LostMilliSec)
	modes := make([]string, 0, len(r.CostByMode))
	for m := range r.CostByMode {
		modes = append(modes, string(m))
	}
	sort.Strings(modes)
	for _, m := range modes {
		fmt.Fprintf(h, "mode %s %d\n", m, r.CostByMode[core.BillingMode(m)])
	}
	fmt.Fprintf(h, "waits %+v\n", r.Waits)
	tiers := make([]string, 0, len(r.WaitsByTier))
	for tier := range r.WaitsByTier {
		tiers = append(tiers, string(tier))
	}
	sort.Strings(tiers)
	for _, tier := range tiers {
		fmt.Fprintf(h, "tier %s %+v\n", tier, r.WaitsByTier[core.Tier(tier)])
	}
	fmt.Fprintf(h, "jobs %d units %d unfinished %d misses %d preempt %d moves %d reclaims %d failures %d leases %d events %d steps %d\n",
		r.Jobs, r.Units, r.Unfinished, r.DeadlineMisses, r.Preemptions, r.Moves, r.Reclaims, r.AcquireFailures, r.Leases, r.Events, r.Steps)
	for _, s := range r.Series {
		fmt.Fprintf(h, "s %d %v %d %d\n", s.At.UnixNano(), s.GPUs, s.AllocatedMilli, s.Pending)
	}
}
