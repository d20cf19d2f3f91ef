package billing

import (
	"fmt"
	"math/big"
	"sort"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// IdleTeam is the name of the allocation line for paid capacity nobody used.
const IdleTeam = "(idle)"

// Use is one team's allocation on a lease: Milli milli-GPUs (summed over
// the lease's GPUs) from From to To.
type Use struct {
	Team     string
	Milli    core.Milli
	From, To time.Time
}

// Line is one team's part of a bill.
type Line struct {
	Team string
	// MilliSeconds is the allocated milli-GPU-seconds within billed time.
	MilliSeconds int64
	Amount       core.Micros
}

// Allocation splits one bill among teams and idle. Lines are sorted by
// team; Idle is the unused part. The amounts sum exactly to Bill.
type Allocation struct {
	Bill  core.Micros
	Lines []Line
	Idle  Line
}

// Allocate splits the bill of a lease with gpus GPUs held over s among
// the teams in uses, by milli-GPU-time weighted by the price in effect
// (a team that ran in peak hours pays peak prices), and leaves the rest of
// the paid capacity as an explicit idle line. Rounding uses the largest
// remainder method, so the lines sum to the bill to the micro-unit.
// Uses are clipped to the billed time; together they may not exceed the
// lease's capacity at any instant.
func Allocate(p *core.PricePlan, gpus int, s Span, uses []Use) (Allocation, error) {
	if gpus < 1 {
		return Allocation{}, &core.FieldError{Field: "gpus", Value: fmt.Sprint(gpus), Allowed: ">= 1"}
	}
	return AllocateMilli(p, core.Milli(gpus)*core.WholeGPU, s, uses)
}

// AllocateMilli is Allocate for a lease of capMilli milli-GPUs: a GPU
// slice's capacity is its share (250 for a quarter-GPU machine), and so
// is what its idle line counts.
func AllocateMilli(p *core.PricePlan, capMilli core.Milli, s Span, uses []Use) (Allocation, error) {
	b, err := Cost(p, s)
	if err != nil {
		return Allocation{}, err
	}
	if capMilli < 1 {
		return Allocation{}, &core.FieldError{Field: "capacity", Value: fmt.Sprint(capMilli), Allowed: ">= 1 milli-GPU"}
	}
	ns, _ := normalize(s)
	from, to := ns.Start, b.PaidUntil
	if err := checkCapacity(uses, capMilli, from, to); err != nil {
		return Allocation{}, err
	}
	r := newRater(p)
	capacity := new(big.Int).Mul(u128Big(r.integral(from, to)), big.NewInt(int64(capMilli)))
	useTime := func(integral func(a, b time.Time) core.U128) map[string]*big.Int {
		w := map[string]*big.Int{}
		for _, u := range uses {
			a, z := maxTime(u.From.Truncate(time.Second), from), minTime(u.To.Truncate(time.Second), to)
			if !z.After(a) || u.Milli == 0 {
				continue
			}
			x := new(big.Int).Mul(u128Big(integral(a, z)), big.NewInt(int64(u.Milli)))
			if w[u.Team] == nil {
				w[u.Team] = new(big.Int)
			}
			w[u.Team].Add(w[u.Team], x)
		}
		return w
	}
	weights := useTime(r.integral)
	seconds := useTime(func(a, b time.Time) core.U128 { return core.U128{Lo: uint64(secondsBetween(a, b))} })
	if capacity.Sign() == 0 {
		// A free plan (or a fee with a zero price): weigh by time alone.
		capacity = big.NewInt(secondsBetween(from, to) * int64(capMilli))
		weights = seconds
	}
	teams := make([]string, 0, len(weights))
	used := new(big.Int)
	for t, w := range weights {
		teams = append(teams, t)
		used.Add(used, w)
	}
	sort.Strings(teams)
	idleW := new(big.Int).Sub(capacity, used)
	shares := make([]*big.Int, 0, len(teams)+1)
	for _, t := range teams {
		shares = append(shares, weights[t])
	}
	shares = append(shares, idleW)
	amounts := largestRemainder(int64(b.Amount), shares, capacity)
	a := Allocation{Bill: b.Amount}
	for i, t := range teams {
		a.Lines = append(a.Lines, Line{Team: t, MilliSeconds: seconds[t].Int64(), Amount: core.Micros(amounts[i])})
	}
	var usedMS int64
	for _, l := range a.Lines {
		usedMS += l.MilliSeconds
	}
	a.Idle = Line{Team: IdleTeam, MilliSeconds: secondsBetween(from, to)*int64(capMilli) - usedMS, Amount: core.Micros(amounts[len(teams)])}
	return a, nil
}

// largestRemainder splits total in proportion to weights (which sum to
// sum) into integers that add up to total exactly: each gets the floor of
// its quota, and the units left go to the largest remainders (ties to the
// earlier weight).
func largestRemainder(total int64, weights []*big.Int, sum *big.Int) []int64 {
	out := make([]int64, len(weights))
	if sum.Sign() == 0 {
		out[len(out)-1] = total
		return out
	}
	neg := total < 0
	t := big.NewInt(total)
	if neg {
		t.Neg(t)
	}
	rems := make([]*big.Int, len(weights))
	var given int64
	for i, w := range weights {
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(t, w), sum, new(big.Int))
		out[i] = q.Int64()
		rems[i] = r
		given += out[i]
	}
	order := make([]int, len(weights))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rems[order[a]].Cmp(rems[order[b]]) > 0 })
	for k := int64(0); k < t.Int64()-given; k++ {
		out[order[k%int64(len(order))]]++
	}
	if neg {
		for i := range out {
			out[i] = -out[i]
		}
	}
	return out
}

// checkCapacity rejects uses that together hold more than capacity
// milli-GPUs at some instant within [from, to).
func checkCapacity(uses []Use, capacity core.Milli, from, to time.Time) error {
	type edge struct {
		at    time.Time
		delta core.Milli
	}
	var edges []edge
	for i, u := range uses {
		if u.Milli < 0 || u.Milli > capacity {
			return &core.FieldError{Field: fmt.Sprintf("uses[%d].milli", i), Value: fmt.Sprint(u.Milli), Allowed: fmt.Sprintf("0..%d (the lease's GPUs)", capacity)}
		}
		if u.To.Before(u.From) {
			return &core.FieldError{Field: fmt.Sprintf("uses[%d].to", i), Value: u.To.Format(time.RFC3339), Allowed: "a time after from"}
		}
		a, z := maxTime(u.From, from), minTime(u.To, to)
		if z.After(a) {
			edges = append(edges, edge{a, u.Milli}, edge{z, -u.Milli})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // ends before starts
	})
	var inUse core.Milli
	for _, e := range edges {
		inUse += e.delta
		if inUse > capacity {
			return &core.FieldError{Field: "uses", Value: fmt.Sprintf("%d milli-GPUs at %s", inUse, e.at.Format(time.RFC3339)), Allowed: fmt.Sprintf("at most %d at any time", capacity)}
		}
	}
	return nil
}

func u128Big(x core.U128) *big.Int {
	hi := new(big.Int).Lsh(new(big.Int).SetUint64(x.Hi), 64)
	return hi.Or(hi, new(big.Int).SetUint64(x.Lo))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Merge sums per-lease allocations into one per team, with one idle line.
func Merge(as []Allocation) Allocation {
	byTeam := map[string]*Line{}
	var out Allocation
	out.Idle.Team = IdleTeam
	for _, a := range as {
		out.Bill += a.Bill
		out.Idle.Amount += a.Idle.Amount
		out.Idle.MilliSeconds += a.Idle.MilliSeconds
		for _, l := range a.Lines {
			if byTeam[l.Team] == nil {
				byTeam[l.Team] = &Line{Team: l.Team}
			}
			byTeam[l.Team].Amount += l.Amount
			byTeam[l.Team].MilliSeconds += l.MilliSeconds
		}
	}
	for _, l := range byTeam {
		out.Lines = append(out.Lines, *l)
	}
	sort.Slice(out.Lines, func(i, j int) bool { return out.Lines[i].Team < out.Lines[j].Team })
	return out
}
