package trace

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// genConfig draws a valid generator config.
func genConfig(t *rapid.T) GenConfig {
	c := DefaultGenConfig()
	c.Jobs = rapid.IntRange(0, 300).Draw(t, "jobs")
	c.RatePerHour = rapid.Int64Range(1, 5000).Draw(t, "rate")
	c.PeakHour = rapid.IntRange(0, 23).Draw(t, "peak")
	c.Amplitude = rapid.Int64Range(0, 1000).Draw(t, "amplitude")
	if rapid.Bool().Draw(t, "hourly?") {
		for h := range c.Hourly {
			c.Hourly[h] = rapid.Int64Range(0, 10).Draw(t, "hourly")
		}
		c.Hourly[rapid.IntRange(0, 23).Draw(t, "busy hour")] = 1
	}
	c.Tiers = TierMix{
		Core:    rapid.Int64Range(0, 5).Draw(t, "core"),
		Regular: rapid.Int64Range(0, 5).Draw(t, "regular"),
		Offline: rapid.Int64Range(0, 5).Draw(t, "offline"),
	}
	c.FractionalPermille = rapid.Int64Range(0, 1000).Draw(t, "fractional")
	c.MedianDuration = rapid.Int64Range(1, 100_000).Draw(t, "median")
	c.P95Duration = rapid.Int64Range(c.MedianDuration, 10_000_000).Draw(t, "p95")
	c.MaxDuration = rapid.Int64Range(1, 30*86400).Draw(t, "max")
	c.Teams = rapid.IntRange(1, 20).Draw(t, "teams")
	return c
}

// TestGenerateProperties: any valid config and seed give a valid trace
// (sorted, ids unique, every job in bounds) of the asked size, the same
// one every time, which survives a generic round trip.
func TestGenerateProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genConfig(t)
		seed := rapid.Uint64().Draw(t, "seed")
		tr := Generate(c, seed)
		if len(tr.Jobs) != c.Jobs {
			t.Fatalf("%d jobs, want %d", len(tr.Jobs), c.Jobs)
		}
		if err := tr.Validate(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tr, Generate(c, seed)); diff != "" {
			t.Fatalf("not deterministic (-first +second):\n%s", diff)
		}
		tierSet := c.Tiers != TierMix{}
		for _, j := range tr.Jobs {
			if j.Duration < 1 || j.Duration > c.MaxDuration {
				t.Fatalf("duration %d outside 1..%d", j.Duration, c.MaxDuration)
			}
			if j.GPUs < 1 || (j.GPUMilli != 1000 && (j.GPUs != 1 || c.FractionalPermille == 0)) {
				t.Fatalf("bad request: %+v", j)
			}
			if (j.Tier != "") != tierSet {
				t.Fatalf("tier %q with mix %+v", j.Tier, c.Tiers)
			}
		}
		var b strings.Builder
		if err := WriteGeneric(&b, tr); err != nil {
			t.Fatal(err)
		}
		back, err := ReadGeneric(strings.NewReader(b.String()), tr.Name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tr.Jobs, back.Jobs); diff != "" {
			t.Fatalf("round trip (-generated +read):\n%s", diff)
		}
	})
}

func TestGenerateSeedsDiffer(t *testing.T) {
	c := DefaultGenConfig()
	c.Jobs = 50
	a, b := Generate(c, 1), Generate(c, 2)
	if cmp.Equal(a.Jobs, b.Jobs) {
		t.Error("seeds 1 and 2 gave the same jobs")
	}
	if a.Name != "synthetic-seed1" {
		t.Errorf("name %q", a.Name)
	}
}

// TestGenerateShape checks the mixes on a large trace: the daily swing
// peaks at PeakHour, the median duration and the p95 come out near their
// settings, and the GPU-count and tier mixes near their weights.
func TestGenerateShape(t *testing.T) {
	c := DefaultGenConfig()
	c.Jobs = 100_000
	tr := Generate(c, 7)

	var byHour [24]int
	var durs []int64
	gpus := map[int]int{}
	tiers := map[core.Tier]int{}
	shared := 0
	for _, j := range tr.Jobs {
		byHour[(j.Submit/3600)%24]++
		durs = append(durs, j.Duration)
		gpus[j.GPUs]++
		tiers[j.Tier]++
		if j.GPUMilli < 1000 {
			shared++
		}
	}
	busiest, quietest := 0, 0
	for h := range byHour {
		if byHour[h] > byHour[busiest] {
			busiest = h
		}
		if byHour[h] < byHour[quietest] {
			quietest = h
		}
	}
	if d := (busiest - c.PeakHour + 24) % 24; d > 1 && d < 23 {
		t.Errorf("busiest hour %d, want about %d (arrivals by hour %v)", busiest, c.PeakHour, byHour)
	}
	if d := (quietest - (c.PeakHour+12)%24 + 24) % 24; d > 1 && d < 23 {
		t.Errorf("quietest hour %d, want about %d", quietest, (c.PeakHour+12)%24)
	}
	// Mean rate: 100,000 jobs at 31 an hour take about 3,226 hours.
	if hours := tr.Jobs[len(tr.Jobs)-1].Submit / 3600; hours < 3100 || hours > 3350 {
		t.Errorf("span %d hours, want about 3226", hours)
	}
	within := func(what string, got, want, tolPct int64) {
		t.Helper()
		if got*100 < want*(100-tolPct) || got*100 > want*(100+tolPct) {
			t.Errorf("%s = %d, want %d ± %d%%", what, got, want, tolPct)
		}
	}
	within("median duration", median(durs), c.MedianDuration, 5)
	s := slices.Clone(durs)
	slices.Sort(s)
	within("p95 duration", s[len(s)*95/100], c.P95Duration, 10)
	var total int64
	for _, w := range c.GPUs {
		total += w.Weight
	}
	for _, w := range c.GPUs {
		within("jobs of "+strconv.FormatInt(w.Value, 10)+" GPUs", int64(gpus[int(w.Value)]), int64(c.Jobs)*w.Weight/total, 10)
	}
	within("core jobs", int64(tiers[core.TierCore]), 30_000, 5)
	within("offline jobs", int64(tiers[core.TierOffline]), 20_000, 5)
	within("shared-GPU jobs", int64(shared), int64(gpus[1])*c.FractionalPermille/1000, 10)
}

func TestGenConfigValidate(t *testing.T) {
	for name, edit := range map[string]func(*GenConfig){
		"negative jobs":     func(c *GenConfig) { c.Jobs = -1 },
		"zero rate":         func(c *GenConfig) { c.RatePerHour = 0 },
		"too slow":          func(c *GenConfig) { c.Jobs, c.RatePerHour = 1_000_000, 1 },
		"peak hour 24":      func(c *GenConfig) { c.PeakHour = 24 },
		"amplitude":         func(c *GenConfig) { c.Amplitude = 1001 },
		"p95 below median":  func(c *GenConfig) { c.P95Duration = c.MedianDuration - 1 },
		"no GPU mix":        func(c *GenConfig) { c.GPUs = nil },
		"GPU count 0":       func(c *GenConfig) { c.GPUs = []Weighted{{0, 1}} },
		"fraction of 1000":  func(c *GenConfig) { c.Fractions = []Weighted{{1000, 1}} },
		"no fractions":      func(c *GenConfig) { c.Fractions = nil },
		"no teams":          func(c *GenConfig) { c.Teams = 0 },
		"negative hourly":   func(c *GenConfig) { c.Hourly[3] = -1 },
		"negative tier mix": func(c *GenConfig) { c.Tiers.Core = -1 },
	} {
		c := DefaultGenConfig()
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate() = nil", name)
		}
	}
	c := DefaultGenConfig()
	c.FractionalPermille, c.Fractions = 0, nil
	if err := c.Validate(); err != nil {
		t.Errorf("no sharing, no fractions: %v", err)
	}
}

func BenchmarkGenerate1M(b *testing.B) {
	c := DefaultGenConfig()
	c.Jobs = 1_000_000
	for b.Loop() {
		Generate(c, 1)
	}
}

// BenchmarkReadGeneric1M reads a million-job generic CSV (issue 5's
// speed target replays one; reading it is part of the replay's time).
func BenchmarkReadGeneric1M(b *testing.B) {
	c := DefaultGenConfig()
	c.Jobs = 1_000_000
	var buf strings.Builder
	if err := WriteGeneric(&buf, Generate(c, 1)); err != nil {
		b.Fatal(err)
	}
	data := buf.String()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		t, err := ReadGeneric(strings.NewReader(data), "1m.csv")
		if err != nil || len(t.Jobs) != c.Jobs {
			b.Fatalf("%d jobs, %v", len(t.Jobs), err)
		}
	}
}

// TestGenerateProgress: progress comes in order, ends at the total, and
// does not change what is generated or written.
func TestGenerateProgress(t *testing.T) {
	cfg := DefaultGenConfig()
	cfg.Jobs = 25_000
	var calls [][2]int
	rec := func(done, total int) { calls = append(calls, [2]int{done, total}) }
	got := GenerateProgress(cfg, 7, rec)
	if diff := cmp.Diff(Generate(cfg, 7), got); diff != "" {
		t.Fatalf("GenerateProgress differs from Generate (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][2]int{{10_000, 25_000}, {20_000, 25_000}, {25_000, 25_000}}, calls); diff != "" {
		t.Errorf("generate progress (-want +got):\n%s", diff)
	}
	calls = nil
	var plain, counted strings.Builder
	if err := WriteGeneric(&plain, got); err != nil {
		t.Fatal(err)
	}
	if err := WriteGenericProgress(&counted, got, rec); err != nil {
		t.Fatal(err)
	}
	if plain.String() != counted.String() {
		t.Error("WriteGenericProgress wrote other bytes than WriteGeneric")
	}
	if diff := cmp.Diff([][2]int{{10_000, 25_000}, {20_000, 25_000}, {25_000, 25_000}}, calls); diff != "" {
		t.Errorf("write progress (-want +got):\n%s", diff)
	}
}
