package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
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
	for _, want := range []string{"<svg", "Fleet GPUs by billing mode", "Paid vs allocated GPUs", "Cost by billing mode", "Waiting time CDF, core tier (to the largest p99, 120 s)", "toy &lt;trace&gt;", "<td>1,234.50</td>"} {
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

func TestTableNumbers(t *testing.T) {
	for _, tt := range []struct {
		in     json.Number
		places int
		want   string
	}{
		{"173855.145687", 2, "173,855.15"},
		{"173855.145687", 0, "173,855"},
		{"999.995", 2, "1,000.00"},
		{"0.0049", 2, "0.00"},
		{"-1234.5", 1, "-1,234.5"},
		{"-0.001", 2, "0.00"},
		{"12", 3, "12.000"},
		{"1.369", 3, "1.369"},
		{"NaN", 2, "NaN"},
	} {
		if got := Fixed(tt.in, tt.places); got != tt.want {
			t.Errorf("fixed(%s, %d) = %q, want %q", tt.in, tt.places, got, tt.want)
		}
	}
	if got := Percent("0.1177"); got != "11.8%" {
		t.Errorf("percent(0.1177) = %q", got)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, tt := range []struct {
		span float64
		n    int
		want float64
	}{
		{888, 5, 200}, {876, 8, 200}, {1, 5, 0.2}, {120, 8, 20}, {67676, 8, 10000}, {0, 5, 1}, {10, 5, 2},
	} {
		if got := niceStep(tt.span, tt.n); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("niceStep(%g, %d) = %g, want %g", tt.span, tt.n, got, tt.want)
		}
	}
	for v, want := range map[float64]string{1234567: "1,234,567", 600: "600", 12.5: "12.5", 0.25: "0.25", 40: "40", -2500: "-2,500"} {
		if got := num(v); got != want {
			t.Errorf("num(%g) = %q, want %q", v, got, want)
		}
	}
}
