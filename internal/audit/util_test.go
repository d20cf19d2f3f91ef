package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/audit/audittest"
	"github.com/gpufleet/gpufleet/internal/gpuutil"
)

// A utilization series replaces the agents' samples of the runs it
// covers: the H100 job at 20% in its samples reads 50% in the series, so
// its busy GPU-hours are half its allocated ones and the downgrade advice
// (p95 under 30%) goes; the series has no memory, so the memory advice of
// the job it covers goes too, while the jobs it does not cover keep
// theirs.
func TestWithUtil(t *testing.T) {
	in := audittest.Workload()
	before, err := audit.Audit(in)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gpuutil.Parse("u.csv", strings.NewReader("id,time,utilization\ninfer-h100,0,50%\nmem-16,0,0.6\nnot-a-job,0,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	in2, n := audit.WithUtil(in, s)
	if n != 2 {
		t.Fatalf("%d runs covered, want 2", n)
	}
	after, err := audit.Audit(in2)
	if err != nil {
		t.Fatal(err)
	}
	job := func(r audit.Report, id string) audit.JobLine {
		for _, p := range r.Periods {
			for _, j := range p.Jobs {
				if j.JobID == id {
					return j
				}
			}
		}
		t.Fatalf("no job %s", id)
		return audit.JobLine{}
	}
	h := job(after, "infer-h100")
	// 50 h of one H100: 25 busy GPU-hours.
	if want := int64(50 * time.Hour / time.Millisecond / 2); h.BusyMilliSeconds != want {
		t.Errorf("infer-h100 busy %d ms, want %d", h.BusyMilliSeconds, want)
	}
	has := func(r audit.Report, kind audit.Kind, job string) bool {
		for _, x := range audittest.ByKind(r, kind) {
			if strings.Contains(x.ID, job) {
				return true
			}
		}
		return false
	}
	if !has(before, audit.ModelDowngrade, "infer-h100") || has(after, audit.ModelDowngrade, "infer-h100") {
		t.Errorf("downgrade of infer-h100: before %v, after %v; want it gone at 50%%", has(before, audit.ModelDowngrade, "infer-h100"), has(after, audit.ModelDowngrade, "infer-h100"))
	}
	if !has(before, audit.RightSizeMemory, "mem-16") || has(after, audit.RightSizeMemory, "mem-16") {
		t.Errorf("memory advice of mem-16: before %v, after %v; want none from a series without memory", has(before, audit.RightSizeMemory, "mem-16"), has(after, audit.RightSizeMemory, "mem-16"))
	}
	if !has(after, audit.RightSizeCount, "gang-8") {
		t.Error("the gang the series does not cover lost its count advice")
	}
	if got := job(after, "gang-8").BusyMilliSeconds; got != job(before, "gang-8").BusyMilliSeconds {
		t.Errorf("gang-8 busy changed: %d → %d", job(before, "gang-8").BusyMilliSeconds, got)
	}
}
