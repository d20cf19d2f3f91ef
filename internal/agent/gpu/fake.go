package gpu

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
)

// Step is one stretch of a Fake's script: from At after the script's
// start, Sample returns Readings (until the next step's At).
type Step struct {
	At       time.Duration
	Readings []Reading
}

// Fake is a scripted source: it plays Steps against a clock, so a test on
// a manual clock decides exactly what the GPUs do and when.
type Fake struct {
	clock clock.Clock
	start time.Time
	steps []Step
	// loop, when > 0, repeats the script with this period.
	loop time.Duration

	mu  sync.Mutex
	err error
}

var _ Source = (*Fake)(nil)

// NewFake returns a fake that starts its script now on c. Steps must be
// in increasing At order.
func NewFake(c clock.Clock, steps ...Step) *Fake {
	return &Fake{clock: c, start: c.Now(), steps: steps}
}

// Loop makes the script repeat every period and returns f.
func (f *Fake) Loop(period time.Duration) *Fake {
	f.loop = period
	return f
}

// Fail makes every Sample fail with err until Fail(nil).
func (f *Fake) Fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Name returns "fake".
func (*Fake) Name() string { return "fake" }

// Close does nothing.
func (*Fake) Close() error { return nil }

// Sample returns a copy of the readings of the step the clock is in; none
// before the first step.
func (f *Fake) Sample(ctx context.Context) ([]Reading, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	elapsed := f.clock.Now().Sub(f.start)
	if f.loop > 0 && elapsed >= 0 {
		elapsed %= f.loop
	}
	var cur *Step
	for i := range f.steps {
		if f.steps[i].At <= elapsed {
			cur = &f.steps[i]
		}
	}
	if cur == nil {
		return []Reading{}, nil
	}
	out := make([]Reading, len(cur.Readings))
	for i, r := range cur.Readings {
		r.Processes = slices.Clone(r.Processes)
		out[i] = r
	}
	return out, nil
}

// DemoSteps is the script of --gpu-source fake: two H100s over a 30
// minute cycle, GPU 0 training flat out, GPU 1 busy for ten minutes, then
// idle with its memory held (what the idle ladder exists to catch).
// Processes are not known, so the zombie rule stays silent on a demo.
func DemoSteps() []Step {
	gpu := func(i int, util int, used int64, power int) Reading {
		return Reading{Index: i, UUID: fmt.Sprintf("GPU-00000000-0000-4000-8000-00000000000%d", i), Name: "NVIDIA H100 80GB HBM3",
			UtilPct: util, MemUsedMiB: used, MemTotalMiB: 81559, PowerW: power, TempC: 35 + util/4}
	}
	return []Step{
		{At: 0, Readings: []Reading{gpu(0, 97, 71234, 650), gpu(1, 64, 40960, 420)}},
		{At: 10 * time.Minute, Readings: []Reading{gpu(0, 95, 71234, 640), gpu(1, 0, 40960, 70)}},
		{At: 20 * time.Minute, Readings: []Reading{gpu(0, 98, 71300, 660), gpu(1, 0, 40960, 69)}},
	}
}
