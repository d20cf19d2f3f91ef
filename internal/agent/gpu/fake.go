package gpu

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Step is one stretch of a Fake's script: from At after the script's
// start, Sample returns Readings (until the next step's At).
type Step struct {
	At       time.Duration
	Readings []Reading
}

// Fake is a scripted source: it plays Steps against a clock, so a test on
// a manual clock decides exactly what the GPUs do and when. (The agent's
// --gpu-source fake is a Machine, driven by the runs.)
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

// Board is the GPUs of a fake machine: Count GPUs of Model, each with
// MemMiB of memory, as the machine's offer says.
type Board struct {
	Count  int
	Model  string
	MemMiB int64
}

// DefaultBoard sizes a Machine that nothing else sizes: one H100 80GB.
var DefaultBoard = Board{Count: 1, Model: "NVIDIA H100 80GB HBM3", MemMiB: 81559}

// Validate reports the first field of b out of range.
func (b Board) Validate() error {
	switch {
	case b.Count < 1 || b.Count > 64:
		return &core.FieldError{Field: "fake-gpus", Value: strconv.Itoa(b.Count), Allowed: "1..64 GPUs"}
	case b.Model == "":
		return &core.FieldError{Field: "fake-gpu-model", Value: "", Allowed: "a GPU model name"}
	case b.MemMiB < 1:
		return &core.FieldError{Field: "fake-gpu-mem-mib", Value: strconv.FormatInt(b.MemMiB, 10), Allowed: "MiB of memory per GPU, >= 1"}
	}
	return nil
}

// Load is the work on one fake GPU: UtilPct of its time busy (0..100),
// MemMiB of its memory held, and PIDs, the processes that hold it (the
// fake lists them as the GPU's compute processes).
type Load struct {
	UtilPct int
	MemMiB  int64
	PIDs    []int
}

// Machine is the fake source the agent's --gpu-source fake opens: the
// GPUs of a Board, whose readings follow what runs on them. Loads, asked
// at every Sample, gives the load on each GPU by index; a GPU it leaves
// out reads idle (0 %, no memory held, idle power). The agent fills it
// from the runs placed on each GPU and the load each declares, so that a
// job that does not use the GPU (sleep) leaves it idle, as on a real
// machine, and nothing is busy that the scheduler did not place.
// Processes are known: each GPU lists the PIDs its load names (the agent
// names the process group of each run placed on it, unless the run
// declares that it holds no GPU process: a zombie, for tests and demos).
type Machine struct {
	board Board
	loads func() map[int]Load
}

var _ Source = (*Machine)(nil)

// NewMachine returns the fake for board (DefaultBoard where its fields
// are zero); loads may be nil (every GPU idle).
func NewMachine(board Board, loads func() map[int]Load) *Machine {
	if board.Count == 0 {
		board.Count = DefaultBoard.Count
	}
	if board.Model == "" {
		board.Model = DefaultBoard.Model
	}
	if board.MemMiB == 0 {
		board.MemMiB = DefaultBoard.MemMiB
	}
	return &Machine{board: board, loads: loads}
}

// Name returns "fake".
func (*Machine) Name() string { return "fake" }

// Close does nothing.
func (*Machine) Close() error { return nil }

// The fake's power and temperature: idle draw plus a share of the range
// by utilization. A plausible shape, not a model of any board.
const (
	fakeIdleW, fakeMaxW = 60, 660
	fakeIdleC, fakeMaxC = 30, 75
)

// Sample returns one reading per GPU of the board, each with its load
// (utilization clamped to 0..100, memory to 0..MemMiB, shared evenly by
// its processes).
func (m *Machine) Sample(ctx context.Context) ([]Reading, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	var loads map[int]Load
	if m.loads != nil {
		loads = m.loads()
	}
	out := make([]Reading, m.board.Count)
	for i := range out {
		l := loads[i]
		util := min(max(l.UtilPct, 0), 100)
		mem := min(max(l.MemMiB, 0), m.board.MemMiB)
		out[i] = Reading{Index: i, UUID: fmt.Sprintf("GPU-00000000-0000-4000-8000-%012d", i), Name: m.board.Model,
			UtilPct: util, MemUsedMiB: mem, MemTotalMiB: m.board.MemMiB,
			PowerW: fakeIdleW + (fakeMaxW-fakeIdleW)*util/100, TempC: fakeIdleC + (fakeMaxC-fakeIdleC)*util/100,
			ProcessesKnown: true}
		for _, pid := range l.PIDs {
			out[i].Processes = append(out[i].Processes, Process{PID: pid, UsedMemMiB: mem / int64(len(l.PIDs)), SMUtilPct: Unknown})
		}
	}
	return out, nil
}
