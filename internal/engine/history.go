package engine

import (
	"math/big"
	"math/bits"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// The fair-share history. The scheduler orders teams by their share of
// the fleet now plus their decayed past use (State.History, read by
// sched's share): each team's use of each GPU class, in milli-GPU-seconds,
// halving every sched.Config.HalfLife. Apply records it, so the live
// loop and the simulator keep it alike: at each Apply the history is
// decayed by the time since State.HistoryAt and the use of that interval
// is added; HistoryAt becomes the Apply's Now.
//
// The use of an interval is the allocation in force during it: what the
// running units held, per team and GPU class (the node's GPU model), as
// the live view counts them (view.use, kept by take and give, so that
// recording costs the number of teams, not of units). It is the view's
// count as the last Apply left it (scratch.used), which is what ran
// until the next one: the simulator finishes units at the instant it
// steps. Without that count — a state just loaded, or changed behind the
// engine's back — the count as Apply finds it stands for the whole
// interval. Units on a machine leaving the fleet (a reclaim notice) are
// not counted, as the scheduler does not count them in a team's share.
//
// Decay is exact integer arithmetic, the same on every platform: the
// history decays in steps of 1/decaySteps of a half-life, on a grid fixed
// in absolute time (multiples of HalfLife/decaySteps since the Unix
// epoch), by 2^(-k/decaySteps) for the k grid points an interval crosses.
// So the decay over a span does not depend on how it was cut into steps
// (one half-life crosses exactly decaySteps points: the history halves),
// and a step shorter than the grid (most steps) decays nothing and costs
// only the addition. Values are rounded down, so what is left of old use
// reaches zero and is forgotten (the team's entry is deleted).

// decayBits sets the decay's grid: decaySteps points per half-life.
const (
	decayBits  = 10
	decaySteps = 1 << decayBits
)

// decayFactor[b] is 2^(-2^b/decaySteps), the decay over 2^b grid steps, as
// a fraction of 1<<62 (rounded down), computed once with math/big.
var decayFactor = func() (f [decayBits]uint64) {
	x := new(big.Float).SetPrec(256).SetFloat64(0.5)
	for b := decayBits - 1; b >= 0; b-- {
		x.Sqrt(x) // 2^(-2^b/decaySteps): the square root of the one above
		q, _ := new(big.Float).SetMantExp(x, 62).Uint64()
		f[b] = q
	}
	return f
}()

// mulQ62 is a*b/2^62, rounded down, for a and b at most 1<<62.
func mulQ62(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi<<2 | lo>>62
}

// decayGrid is the number of decay grid points (multiples of
// halfLife/decaySteps since the Unix epoch) at or before t.
func decayGrid(t time.Time, halfLife time.Duration) int64 {
	n, h := t.UnixNano(), int64(halfLife)
	q, r := n/h, n%h
	if r < 0 {
		q, r = q-1, r+h
	}
	hi, lo := bits.Mul64(uint64(r), decaySteps)
	f, _ := bits.Div64(hi, lo, uint64(h)) // hi < h: r < h
	return q<<decayBits + int64(f)
}

// historyHalfLife is the half-life history is kept with: the scheduler's,
// at least a second (the scheduler divides by it in whole seconds).
func historyHalfLife(hl time.Duration) time.Duration {
	return max(hl, time.Second)
}

// recordHistory brings st.History from st.HistoryAt to now: decays it and
// adds the use of the interval. Apply calls it first, before the
// decisions change what runs. halfLife zero (decisions not made by Step)
// records nothing, and it reports false: HistoryAt stays, and no count
// is known from then on. The first recording only starts the clock.
func recordHistory(st *State, now time.Time, halfLife time.Duration) bool {
	if halfLife <= 0 {
		return false
	}
	at := st.HistoryAt
	if at.IsZero() {
		st.HistoryAt = now
		return true
	}
	if !now.After(at) {
		return true // a second Apply at the same instant, or time going back
	}
	sc := st.scratch
	hl := historyHalfLife(halfLife)
	if k := decayGrid(now, hl) - decayGrid(at, hl); k > 0 {
		decayHistory(st.History, k)
	}
	dt := int64(now.Sub(at))
	switch {
	case sc != nil && sc.usedOK && sc.usedAt.Equal(at):
		st.accrue(sc.v.useKeys, sc.used, dt)
	case sc != nil && sc.live:
		st.accrue(sc.v.useKeys, sc.v.use, dt)
	default:
		st.accrueUnits(dt)
	}
	st.HistoryAt = now
	return true
}

// noteUse keeps, at the end of Apply, the allocation per team and class
// it leaves (the live view's count): what runs from st.HistoryAt until
// the next recording.
func noteUse(st *State, recorded bool) {
	sc := st.scratch
	if sc == nil {
		return
	}
	sc.usedOK = recorded && sc.live
	if sc.usedOK {
		sc.used = append(sc.used[:0], sc.v.use...)
		sc.usedAt = st.HistoryAt
	}
}

// decayHistory decays every entry of h by k grid steps, deleting what
// reaches zero.
func decayHistory(h map[string]sched.Usage, k int64) {
	whole, frac := k>>decayBits, k&(decaySteps-1)
	f := uint64(1) << 62
	for b := range decayBits {
		if frac>>b&1 != 0 {
			f = mulQ62(f, decayFactor[b])
		}
	}
	decay := func(v int64) int64 {
		if whole >= 63 {
			return 0
		}
		neg := v < 0
		m := uint64(v)
		if neg {
			m = -m
		}
		m = mulQ62(m, f) >> whole
		if neg {
			return -int64(m)
		}
		return int64(m)
	}
	for team, u := range h {
		for c, v := range u {
			if v = decay(v); v == 0 {
				delete(u, c)
			} else {
				u[c] = v
			}
		}
		if len(u) == 0 {
			delete(h, team)
		}
	}
}

// accrue adds to the history dt nanoseconds of the allocation use (milli
// per team and class, keyed by keys).
func (st *State) accrue(keys []teamClass, use []int64, dt int64) {
	for i, m := range use {
		if m > 0 {
			st.addHistory(keys[i].team, keys[i].class, core.MulDivHalfEven(m, dt, int64(time.Second)))
		}
	}
}

// accrueUnits is accrue for the allocation of the running units, counted
// as the live view would (every part on a node), for a state without a
// live view.
func (st *State) accrueUnits(dt int64) {
	gen := st.stampLeases()
	for _, u := range st.Units {
		if u.State != core.JobRunning && u.State != core.JobCheckpointing {
			continue
		}
		onNodes := true
		for i := range u.Parts {
			if l := st.partLease(u, i, gen); l == nil || !isNode(l) {
				onNodes = false
				break
			}
		}
		if !onNodes {
			continue
		}
		for i, p := range u.Parts {
			m := int64(len(p.GPUs)) * int64(u.Job.Request.MilliPerGPU)
			st.addHistory(u.Job.Team, st.partLease(u, i, gen).Offer.GPUModel, core.MulDivHalfEven(m, dt, int64(time.Second)))
		}
	}
}

// addHistory adds ms milli-GPU-seconds of class to team's history.
func (st *State) addHistory(team, class string, ms int64) {
	if ms == 0 {
		return
	}
	if st.History == nil {
		st.History = map[string]sched.Usage{}
	}
	h := st.History[team]
	if h == nil {
		h = sched.Usage{}
		st.History[team] = h
	}
	h[class] += ms
}

// teamClass is a team's allocation on one GPU class.
type teamClass struct{ team, class string }

// addUse counts milli of u's on node n in the view's allocation per team
// and class. A team and class keeps its index in v.use for the scratch's
// life (the count noteUse keeps refers to them by it); u remembers the
// last one it had, checked before use, so that a unit taken and given
// again, or counted at every build, looks nothing up.
func (v *view) addUse(u *Unit, n int, milli int64) {
	team, class := u.Job.Team, v.nodes[n].GPUModel
	if i := u.useI - 1; i >= 0 && i < len(v.useKeys) && v.useKeys[i].team == team && v.useKeys[i].class == class {
		v.use[i] += milli
		return
	}
	k := teamClass{team, class}
	i, ok := v.useIx[k]
	if !ok {
		if v.useIx == nil {
			v.useIx = map[teamClass]int{}
		}
		i = len(v.useKeys)
		v.useIx[k] = i
		v.useKeys = append(v.useKeys, k)
		v.use = append(v.use, 0)
	}
	u.useI = i + 1
	v.use[i] += milli
}
