package bound

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
	gonumlp "gonum.org/v1/gonum/optimize/convex/lp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// exact solves a small Program with gonum's simplex. Each <= row gets a
// slack column and each = row an artificial column at a prohibitive cost,
// so that the slacks and artificials are a feasible first basis (every
// right-hand side is >= 0): gonum's own first phase declared feasible
// programs infeasible on some degenerate ones (CLP solved them). At the
// optimum the artificials must be zero — else the program is infeasible,
// or the cost not prohibitive enough, and the test says so.
func exact(t interface{ Fatalf(string, ...any) }, prog *Program) float64 {
	nCols := len(prog.Cols) + len(prog.Rows) // one slack or artificial per row
	A := mat.NewDense(len(prog.Rows), nCols, nil)
	c := make([]float64, nCols)
	b := make([]float64, len(prog.Rows))
	maxCost := 1.0
	for j, col := range prog.Cols {
		c[j] = col.Cost
		maxCost = max(maxCost, col.Cost)
		for i, r := range col.Rows {
			A.Set(r, j, A.At(r, j)+col.Coefs[i])
		}
	}
	basic := make([]int, len(prog.Rows))
	for i, r := range prog.Rows {
		if r.RHS < 0 {
			t.Fatalf("row %s: right-hand side %v < 0", r.Name, r.RHS)
		}
		b[i] = r.RHS
		j := len(prog.Cols) + i
		A.Set(i, j, 1)
		if r.Sense == 'E' {
			c[j] = 1e4 * maxCost
		}
		basic[i] = j
	}
	opt, x, err := gonumlp.Simplex(c, A, b, 1e-10, basic)
	if err != nil {
		t.Fatalf("simplex: %v", err)
	}
	for i, r := range prog.Rows {
		if r.Sense == 'E' && x[len(prog.Cols)+i] > 1e-7 {
			t.Fatalf("row %s: artificial %v at the optimum: infeasible program", r.Name, x[len(prog.Cols)+i])
		}
	}
	return opt
}

func explicit(t testing.TB, jobs []*core.Job, offers []core.Offer) *Program {
	t.Helper()
	prog, err := Explicit(Input{Jobs: jobs, Offers: offers}, Options{Wait: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// The written-out program has the optima worked out by hand in
// lp_test.go: it is the LP the ascent bounds.
func TestExplicitHandOptima(t *testing.T) {
	spot := job("spot", 0, 8, 2*time.Hour)
	spot.Interruptible = true
	touOffer := offer8()
	touOffer.Plans = touOffer.Plans[:1]
	touOffer.Plans[0].TimeOfUse = &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{Weekdays: []time.Weekday{0, 1, 2, 3, 4, 5, 6}, StartHour: 22, EndHour: 6, MultiplierBP: 5000}}}
	deferred := job("deferred", 12*time.Hour, 8, 2*time.Hour)
	deferred.Deferrable, deferred.Deadline = true, start.Add(24*time.Hour)
	terms := offer8()
	terms.Plans = []core.PricePlan{terms.Plans[0],
		{Mode: core.Daily, Price: 100_000_000, Per: core.Day, Granularity: 86400, Term: 86400},
		{Mode: core.Weekly, Price: 4_125_000, Per: core.Hour, Granularity: 16 * 3600, Term: 16 * 3600},
	}
	for _, tc := range []struct {
		name   string
		jobs   []*core.Job
		offers []core.Offer
		want   float64
	}{
		{"short work on demand", []*core.Job{job("a", 0, 8, 2*time.Hour)}, []core.Offer{offer8()}, 16},
		{"a full day on the term", []*core.Job{job("a", 0, 8, 24*time.Hour)}, []core.Offer{offer8()}, 96},
		{"base on terms, burst on demand", []*core.Job{job("base", 0, 8, 48*time.Hour), job("burst", 30*time.Hour, 8, 2*time.Hour)}, []core.Offer{offer8()}, 208},
		{"interruptible on spot", []*core.Job{spot}, []core.Offer{offer8()}, 4},
		{"deferred to off-peak", []*core.Job{deferred}, []core.Offer{touOffer}, 8},
		{"the day term, not two shorter ones", []*core.Job{job("a", 0, 8, 24*time.Hour)}, []core.Offer{terms}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exact(t, explicit(t, tc.jobs, tc.offers)); got < tc.want-1e-6 || got > tc.want+1e-6 {
				t.Errorf("exact optimum %.6f, want %.6f", got, tc.want)
			}
		})
	}
}

// Whatever the workload, the ascent's value is a lower bound on the LP's
// exact optimum (that is what makes it a bound), and the start it improves
// on is no higher.
func TestAscentBelowExactOptimum(t *testing.T) {
	weekly := offer8()
	weekly.ID = "m8w"
	weekly.Plans = append(weekly.Plans[:1:1], core.PricePlan{Mode: core.Weekly, Price: 3_000_000, Per: core.Hour, Granularity: 7 * 86400, Term: 7 * 86400})
	var worst float64 = 1
	rapid.Check(t, func(t *rapid.T) {
		var jobs []*core.Job
		for i := range rapid.IntRange(1, 5).Draw(t, "jobs") {
			j := job(fmt.Sprint("j", i), time.Duration(rapid.IntRange(0, 30).Draw(t, "submit_h"))*time.Hour,
				rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus"), time.Duration(rapid.IntRange(30, 20*60).Draw(t, "dur_min"))*time.Minute)
			j.Interruptible = rapid.Bool().Draw(t, "intr")
			jobs = append(jobs, j)
		}
		offers := []core.Offer{offer8()}
		if rapid.Bool().Draw(t, "weekly") {
			offers = append(offers, weekly)
		}
		in := Input{Jobs: jobs, Offers: offers}
		r, err := LP(in, Options{Wait: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		prog, err := Explicit(in, Options{Wait: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		opt := exact(t, prog)
		if got := r.Cost.Float(); got > opt*(1+1e-9)+1e-6 {
			t.Fatalf("bound %.6f above the LP optimum %.6f", got, opt)
		}
		if r.Initial > r.Cost {
			t.Fatalf("start %s above the bound %s", r.Initial, r.Cost)
		}
		if opt > 0 {
			worst = min(worst, r.Cost.Float()/opt)
		}
	})
	t.Logf("worst bound / LP optimum: %.4f", worst)
}

func TestWriteMPS(t *testing.T) {
	prog := explicit(t, []*core.Job{job("a", 0, 8, 2*time.Hour)}, []core.Offer{offer8()})
	var buf bytes.Buffer
	if err := prog.WriteMPS(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"NAME gpufleet-lp-bound\nROWS\n N cost\n", " E work_0\n", " L rate_0_0\n", " L cap_0_0\n", "\nCOLUMNS\n", " yf_0_0 cost 1\n", " rhs work_0 16\n", "ENDATA\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("MPS lacks %q:\n%s", want, out)
		}
	}
	// Each column's entries are contiguous, as MPS requires.
	seen, last := map[string]bool{}, ""
	section := ""
	for _, line := range strings.Split(out, "\n") {
		if line != "" && line[0] != ' ' {
			section = line
			continue
		}
		if section != "COLUMNS" || line == "" {
			continue
		}
		name := strings.Fields(line)[0]
		if name != last && seen[name] {
			t.Fatalf("column %s split in the COLUMNS section", name)
		}
		seen[name], last = true, name
	}
}

// A program gonum's own first phase called infeasible (found by
// TestAscentBelowExactOptimum): COIN-OR CLP solves it to 29.8458333, and
// so does exact; the ascent stays below.
func TestExactDegenerate(t *testing.T) {
	var jobs []*core.Job
	for i, s := range []struct {
		h, gpus, min int
		intr         bool
	}{{24, 2, 1200, true}, {5, 1, 33, false}, {19, 1, 61, true}, {12, 2, 44, true}, {12, 2, 801, false}} {
		j := job(fmt.Sprint("j", i), time.Duration(s.h)*time.Hour, s.gpus, time.Duration(s.min)*time.Minute)
		j.Interruptible = s.intr
		jobs = append(jobs, j)
	}
	in := Input{Jobs: jobs, Offers: []core.Offer{offer8()}}
	opt := exact(t, explicit(t, in.Jobs, in.Offers))
	if math.Abs(opt-29.8458333) > 1e-6 {
		t.Errorf("exact optimum %.7f, CLP's is 29.8458333", opt)
	}
	r, err := LP(in, Options{Wait: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Cost.Float(); got > opt+1e-6 || got < opt*0.99 {
		t.Errorf("ascent %v against the optimum %v", got, opt)
	}
}
