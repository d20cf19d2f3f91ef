package audit_test

import (
	"errors"
	. "github.com/gpufleet/gpufleet/internal/audit"
	. "github.com/gpufleet/gpufleet/internal/audit/audittest"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func mustAudit(t *testing.T, in Input) Report {
	t.Helper()
	r, err := Audit(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSavingsByHand checks one saving of every kind against a figure
// worked out here from the catalog's prices, independently of the code.
func TestSavingsByHand(t *testing.T) {
	r := mustAudit(t, Workload())
	cases := []struct {
		kind    Kind
		subject string
		want    core.Micros
		why     string
	}{
		// 10 h on an A100 at 4.00/h = 40.00; the same 10 h on a T4
		// (16 GiB ≥ 8 GiB peak + 25%) at 0.50/h = 5.00.
		{RightSizeMemory, "mem-16", Money("35"), "40 - 10 x 0.5"},
		// 20 h x 8 A100 at 4.00 = 640.00; 3 of 8 GPUs showed work, so
		// 5/8 of it.
		{RightSizeCount, "gang-8", Money("400"), "640 x 5/8"},
		// 50 h on an H100 at 8.00 = 400.00; an L4 at 0.80 does 300/h x 80%
		// = 240/h >= 1000/h x p95 20% = 200/h, and 24 GiB >= 20 GB asked.
		{ModelDowngrade, "infer-h100", Money("360"), "400 - 50 x 0.8"},
		// 4 h of V100 at 1.20 x 1.5 (weekday 10-14) = 7.20; at the 0.5x
		// night window it would be 2.40.
		{OffPeak, "etl-peak", Money("4.8"), "7.2 - 4 x 1.2 x 0.5"},
		// Demand: 8 GPUs x 20 h, 1 x 10 h, 1 x 100 h (no two at once).
		// Now: two monthly A100s, 720 of their 730 h billed in November
		// (2 x 1972.602740), + 6 x 20 h on demand at 4.00 = 480; the
		// planner holds no base: all 270 GPU-h on demand = 1080.
		{LeaseChange, "A100-80G", 2*Money("1972.60274") + Money("480") - Money("1080"), "3945.20548 + 480 - 1080"},
	}
	for _, c := range cases {
		got := ByKind(r, c.kind)
		if len(got) != 1 || got[0].Subject != c.subject {
			t.Errorf("%s: got %+v, want one for %s", c.kind, got, c.subject)
			continue
		}
		if got[0].Saving != c.want {
			t.Errorf("%s %s: saving %s, want %s (%s)", c.kind, c.subject, got[0].Saving, c.want, c.why)
		}
	}
	if got := EvidenceOf(ByKind(r, RightSizeMemory)[0], "to_model"); got != "T4" {
		t.Errorf("memory: to_model %s, want T4", got)
	}
	// The share it did not choose: 8 GiB + 25% of 80 GiB rounds up to a
	// quarter GPU, 40 x 3/4 = 30 saved, less than the T4's 35.
	if got := EvidenceOf(ByKind(r, RightSizeMemory)[0], "other_option"); got != "a 250 milli-GPU share (saving 30)" {
		t.Errorf("memory: other_option %q", got)
	}
	if got := EvidenceOf(ByKind(r, ModelDowngrade)[0], "to_model"); got != "L4" {
		t.Errorf("downgrade: to_model %s, want L4 (T4 is not in the throughput table)", got)
	}
	if got := EvidenceOf(ByKind(r, LeaseChange)[0], "committed_gpus_planned"); got != "0" {
		t.Errorf("lease change: planned base %s, want 0", got)
	}
	// Ordering: by saving, largest first.
	for i := 1; i < len(r.Recommendations); i++ {
		if r.Recommendations[i].Saving > r.Recommendations[i-1].Saving {
			t.Errorf("recommendations out of order at %d", i)
		}
	}
	if want := Money("35") + Money("400") + Money("360") + Money("4.8") + Money("3345.20548"); r.Saving != want {
		t.Errorf("total saving %s, want %s", r.Saving, want)
	}
}

// TestBillByHand checks the period's bill and idle line.
func TestBillByHand(t *testing.T) {
	r := mustAudit(t, Workload())
	p := r.Periods[0]
	// On demand: 40 + 640 + 400 + 7.2; two monthly A100s, 720 of their
	// 730 h in November: 2 x 2000 x 720/730 = 3945.205479 (each part
	// rounded half to even: 1972.602740).
	want := Money("40") + Money("640") + Money("400") + Money("7.2") + 2*Money("1972.60274")
	if p.Summary.Cost != want {
		t.Errorf("cost %s, want %s", p.Summary.Cost, want)
	}
	if p.Summary.AllocatedCost+p.Summary.IdleCost != p.Summary.Cost {
		t.Errorf("allocated %s + idle %s != cost %s", p.Summary.AllocatedCost, p.Summary.IdleCost, p.Summary.Cost)
	}
	// train-small used 100 of l-base-1's 720 h: 1972.60274 x 100/720.
	var small JobLine
	for _, j := range p.Jobs {
		if j.JobID == "train-small" {
			small = j
		}
	}
	if w := core.Micros(core.MulDivHalfEven(int64(Money("1972.60274")), 100, 720)); small.Cost != w {
		t.Errorf("train-small cost %s, want %s", small.Cost, w)
	}
	if p.Summary.ZombiesFound != 1 || p.Summary.ZombiesReleased != 1 || p.Summary.Alerts != 2 {
		t.Errorf("zombies %d/%d alerts %d, want 1/1 and 2", p.Summary.ZombiesFound, p.Summary.ZombiesReleased, p.Summary.Alerts)
	}
	// Paid: 10 + 160 + 50 + 4 GPU-h on demand + 2 x 720 h committed.
	if w := int64(10+160+50+4+1440) * 3600 * 1000; p.Summary.PaidMilliSeconds != w {
		t.Errorf("paid %d, want %d", p.Summary.PaidMilliSeconds, w)
	}
}

// TestOneRecommendationPerJob: a job with a memory and a model
// recommendation gets the larger, and names the other.
func TestOneRecommendationPerJob(t *testing.T) {
	in := Workload()
	// mem-16 at 10% utilization: a downgrade candidate too.
	for i := range in.Samples {
		if in.Samples[i].LeaseID == "l-mem" {
			in.Samples[i].UtilPct = 10
		}
	}
	r := mustAudit(t, in)
	var got []Recommendation
	for _, x := range r.Recommendations {
		if x.Subject == "mem-16" {
			got = append(got, x)
		}
	}
	if len(got) != 1 {
		t.Fatalf("mem-16 has %d recommendations, want 1: %+v", len(got), got)
	}
	// Memory: T4 at 0.5 saves 35; the downgrade keeps the 16 GiB asked, so
	// the cheapest model is again T4 (16 GiB): the same 35. Ties go to
	// memory, and the downgrade is listed as superseded.
	if got[0].Kind != RightSizeMemory || got[0].Saving != Money("35") || len(got[0].Supersedes) != 1 || got[0].Supersedes[0].Kind != ModelDowngrade {
		t.Errorf("mem-16: %+v", got[0])
	}
}

func TestTeamReport(t *testing.T) {
	in := Workload()
	full := mustAudit(t, in)
	var sum core.Micros
	for _, team := range []string{"data", "nlp", "research", "vision"} {
		in.Team = team
		r := mustAudit(t, in)
		for _, p := range r.Periods {
			for _, l := range p.Lines {
				if l.Team != team {
					t.Errorf("team %s sees line of %s", team, l.Team)
				}
			}
			for _, j := range p.Jobs {
				if j.Team != team {
					t.Errorf("team %s sees job %s of %s", team, j.JobID, j.Team)
				}
			}
		}
		for _, x := range r.Recommendations {
			if x.Team != team {
				t.Errorf("team %s sees recommendation %s", team, x.ID)
			}
		}
		sum += r.Total.Cost
	}
	if sum != full.Total.AllocatedCost {
		t.Errorf("teams' costs sum to %s, want the allocated %s", sum, full.Total.AllocatedCost)
	}
}

func TestWeeks(t *testing.T) {
	in := Workload()
	in.Period = Week
	r := mustAudit(t, in)
	// Nov 2026 starts on a Sunday: W44 (1 day), W45..W48, W49 (Nov 30).
	var labels []string
	for _, p := range r.Periods {
		labels = append(labels, p.Label)
	}
	want := []string{"2026-W44", "2026-W45", "2026-W46", "2026-W47", "2026-W48", "2026-W49"}
	if len(labels) != len(want) {
		t.Fatalf("labels %v, want %v", labels, want)
	}
	for i := range want {
		if labels[i] != want[i] {
			t.Errorf("labels %v, want %v", labels, want)
		}
	}
	month := mustAudit(t, Workload())
	if r.Total.Cost != month.Total.Cost {
		t.Errorf("weeks cost %s, month %s", r.Total.Cost, month.Total.Cost)
	}
}

func TestInputErrors(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Input)
		field string
	}{
		{"unknown offer", func(in *Input) { in.Leases[0].OfferID = "nope" }, "leases[0].offer"},
		{"mode not offered", func(in *Input) { in.Leases[2].Mode = core.Monthly }, "leases[2].mode"},
		{"unknown job", func(in *Input) { in.Runs[0].JobID = "ghost" }, "runs[0].job"},
		{"gpu out of range", func(in *Input) { in.Runs[0].GPUs = []int{3} }, "runs[0].gpus"},
		{"to before from", func(in *Input) { in.To = in.From }, "to"},
		{"period", func(in *Input) { in.Period = "year" }, "period"},
		{"threshold", func(in *Input) { in.Config.UtilP95Pct = 101 }, "util_p95_pct"},
		{"overcommitted", func(in *Input) { in.Runs = append(in.Runs, NewRun("mem-16", "l-mem", []int{0}, At(2, 0), At(2, 10))) }, "runs"},
	}
	for _, c := range cases {
		in := Workload()
		c.edit(&in)
		_, err := Audit(in)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want a FieldError on %s", c.name, err, c.field)
		}
	}
}

func TestParseTime(t *testing.T) {
	sh, _ := time.LoadLocation("Asia/Shanghai")
	cases := []struct {
		in   string
		loc  *time.Location
		want time.Time
	}{
		{"2026-11", time.UTC, Nov},
		{"2026-11-02", time.UTC, At(2, 0)},
		{"2026-11-02T08:00:00Z", sh, At(2, 8)},
		{"2026-11", sh, time.Date(2026, 11, 1, 0, 0, 0, 0, sh)},
	}
	for _, c := range cases {
		got, err := ParseTime("from", c.in, c.loc)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "2026", "2026-13", "yesterday", "2026-11-02 08:00"} {
		_, err := ParseTime("from", bad, time.UTC)
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != "from" {
			t.Errorf("ParseTime(%q): %v, want a FieldError on from", bad, err)
		}
	}
}
