package openb

import (
	"testing"
)

// BenchmarkOpenbFGD is one openb run at 130% — the default trace on the
// 1,213 GPU nodes, 10,866 arrivals for seed 42 — under FGD.
func BenchmarkOpenbFGD(b *testing.B) { benchmarkRun(b, "fgd") }

// BenchmarkOpenbGpufleet is the same run under gpufleet's policy.
func BenchmarkOpenbGpufleet(b *testing.B) { benchmarkRun(b, "gpufleet") }

// BenchmarkOpenbBestFit is the same run under BestFit.
func BenchmarkOpenbBestFit(b *testing.B) { benchmarkRun(b, "bestfit") }

func benchmarkRun(b *testing.B, policy string) {
	s := defaultScenario(b)
	b.ResetTimer()
	for b.Loop() {
		r, err := s.Run(policy, 42, DefaultInflation)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.AllocationRatio*100, "alloc%")
	}
}
