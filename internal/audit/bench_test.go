package audit_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/gpufleet/gpufleet/internal/audit"
	. "github.com/gpufleet/gpufleet/internal/audit/audittest"
	"github.com/gpufleet/gpufleet/internal/core"
)

// fleet is a month of a fleet: n one-GPU-per-job leases of 8 GPUs, each
// GPU running one job for 100 hours and sampled every 10 minutes.
func fleet(n int) Input {
	in := Input{From: Nov, To: Nov.AddDate(0, 1, 0), Period: Month, Currency: "USD", Offers: Catalog(), Now: Nov.AddDate(0, 1, 0)}
	for i := range n {
		id := fmt.Sprintf("l%d", i)
		start := Nov.Add(time.Duration(i%500) * time.Hour)
		in.Leases = append(in.Leases, NewLease(id, "a100x8", core.OnDemand, start, start.Add(200*time.Hour)))
		for g := range 8 {
			jid := fmt.Sprintf("j%d-%d", i, g)
			in.Jobs = append(in.Jobs, NewJob(jid, fmt.Sprintf("team%d", i%7)).Mem(40000).Build())
			in.Runs = append(in.Runs, NewRun(jid, id, []int{g}, start, start.Add(100*time.Hour)))
			in.Samples = append(in.Samples, Samples(id, g, start, start.Add(100*time.Hour), 10*time.Minute, 25, 30000)...)
		}
	}
	return in
}

func BenchmarkAudit(b *testing.B) {
	for _, n := range []int{10, 100} {
		in := fleet(n)
		b.Run(fmt.Sprintf("leases=%d/gpus=%d/samples=%d", n, 8*n, len(in.Samples)), func(b *testing.B) {
			for b.Loop() {
				if _, err := Audit(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
