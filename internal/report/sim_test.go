package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sim"
)

func sampleResults() []*sim.Result {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	r := &sim.Result{Policy: "gpufleet", Cost: 1_234_500_000, CostByMode: map[core.BillingMode]core.Micros{core.OnDemand: 1_000_000_000, core.Spot: 234_500_000},
		IdleCost: 100_000_000, PaidMilliSec: 3_600_000 * 100, AllocatedMilliSec: 3_600_000 * 80, Waits: sim.Waits{Count: 10, P50: 60, P95: 300, P99: 600, Max: 900},
		WaitsByTier: map[core.Tier]sim.Waits{core.TierCore: {Count: 3, P95: 120, P99: 120, Percentiles: corePct()}},
		Series:      []sim.Sample{{At: t0, GPUs: [5]int32{8, 0, 0, 0, 0}, AllocatedMilli: 6000}, {At: t0.Add(time.Hour), GPUs: [5]int32{16, 8, 0, 0, 0}, AllocatedMilli: 20500}}}
	return []*sim.Result{r}
}

// corePct is three core waits, 0, 30 and 120 s, as percentiles.
func corePct() []int64 {
	p := make([]int64, 101)
	for k := range p {
		switch {
		case k > 66:
			p[k] = 120
		case k > 33:
			p[k] = 30
		}
	}
	return p
}

func TestSimViewJSON(t *testing.T) {
	v := NewSimView("toy", "USD", 7, "tier: regular", sampleResults(), 617_250_000, map[string]int{"cpu-only": 3})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cost":1234.5`, `"paid_gpu_hours":100`, `"allocated_gpu_hours":80`, `"idle_share":0.2`, `"wait_p95_s":300`, `"vs_lower_bound":2`, `"lower_bound":{"cost":617.25`, `"core":{"count":3`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s: %s", want, b)
		}
	}
}

func TestSimHTMLIsSelfContained(t *testing.T) {
	res := sampleResults()
	var b bytes.Buffer
	if err := WriteSimHTML(&b, NewSimView("toy <trace>", "USD", 7, "", res, 617_250_000, nil), res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"<svg", "Fleet GPUs by billing mode", "Paid vs allocated GPUs", "Cost by billing mode", "Waiting time CDF, core tier (to the largest p99, 120 s)", "toy &lt;trace&gt;", "1234.5"} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(out, "regular tier") {
		t.Error("a CDF is drawn for a tier without waits")
	}
	for _, banned := range []string{"<script", "http://cdn", "https://"} {
		if strings.Contains(out, banned) {
			t.Errorf("HTML contains %q: not self-contained", banned)
		}
	}
}

func TestSimCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSimCSV(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	if rows[2][2] != "16" || rows[2][3] != "8" || rows[2][7] != "20.5" {
		t.Errorf("row %v", rows[2])
	}
}
