package plan

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// MaxLength is the longest project [ChooseTerm] plans, in seconds: ten
// years of 8760 hours (twelve 730-hour months) each.
const MaxLength int64 = 10 * 8760 * 3600

// MaxSteps bounds the covering knapsack's table: a project may be at most
// this many of its prices' common time unit long. With periods of whole
// hours that allows 29 years, far beyond [MaxLength]; it binds only when a
// fixed period is not a whole number of minutes or so.
const MaxSteps = 1 << 18

// MaxPrices is the most periods one request may offer.
const MaxPrices = 32

// PeriodPrice is one way to lease a machine for a stretch of time: a name,
// the lease's length and what one lease costs.
//
// A fixed period (Granularity 0) is a lease of exactly Seconds, charged
// Price in full however little of it is used: a committed day, week, month
// or any other term. A mix may hold any number of them, back to back.
//
// A pay-as-you-go period (Granularity > 0) is on-demand: one lease that
// runs as long as needed and is charged Price per Seconds pro rata, per
// started Granularity seconds, at least MinCharge seconds. Price is then a
// rate (3.50 per hour) rather than the cost of a lease. A mix holds at most
// one pay-as-you-go lease per machine: on-demand time is one continuous
// lease, billed once, so the final partial hour of an hourly price billed
// per second is charged to the second.
type PeriodPrice struct {
	// Name labels the period in plans and reasons: "hour", "week",
	// "3 months". Names are unique within a request.
	Name string
	// Seconds is the length of one period, 1..MaxLength.
	Seconds int64
	// Price is the cost of one period on one machine, >= 0.
	Price core.Micros
	// Granularity is 0 for a fixed period, else the billing increment of
	// a pay-as-you-go one in seconds (1: per-second billing).
	Granularity int64
	// MinCharge is the least billed time of a pay-as-you-go lease in
	// seconds; fixed periods ignore it.
	MinCharge int64
}

// PayAsYouGo reports whether p is billed pro rata rather than per whole
// period.
func (p PeriodPrice) PayAsYouGo() bool { return p.Granularity > 0 }

// Fixed returns a fixed lease of one standard period, named after it.
func Fixed(period core.Period, price core.Micros) PeriodPrice {
	return PeriodPrice{Name: string(period), Seconds: period.Seconds(), Price: price}
}

// OnDemand returns a pay-as-you-go price per standard period, billed per
// started granularity seconds with a minimum charge.
func OnDemand(period core.Period, price core.Micros, granularity, minCharge int64) PeriodPrice {
	return PeriodPrice{Name: string(period), Seconds: period.Seconds(), Price: price, Granularity: granularity, MinCharge: minCharge}
}

// TermRequest asks for the cheapest way to rent Count machines for Length
// seconds at Prices.
type TermRequest struct {
	// Length is the project's length in seconds, 1..MaxLength.
	Length int64
	// Count is the number of machines (or GPUs, when prices are per GPU)
	// rented for the whole length; every cost is multiplied by it.
	Count int
	// Prices are the periods to choose from, 1..MaxPrices.
	Prices []PeriodPrice
}

// Validate reports the first problem with r as a *core.FieldError.
func (r TermRequest) Validate() error {
	if r.Length < 1 || r.Length > MaxLength {
		return &core.FieldError{Field: "length", Value: fmt.Sprint(r.Length), Allowed: fmt.Sprintf("a length of 1..%d seconds (10 years)", MaxLength)}
	}
	if r.Count < 1 {
		return &core.FieldError{Field: "count", Value: fmt.Sprint(r.Count), Allowed: "a count of machines >= 1"}
	}
	if len(r.Prices) == 0 || len(r.Prices) > MaxPrices {
		return &core.FieldError{Field: "prices", Value: fmt.Sprintf("%d prices", len(r.Prices)), Allowed: fmt.Sprintf("1..%d periods with a price", MaxPrices)}
	}
	seen := make(map[string]bool, len(r.Prices))
	for i, p := range r.Prices {
		if p.Name == "" || seen[p.Name] {
			return &core.FieldError{Field: fmt.Sprintf("prices[%d].name", i), Value: p.Name, Allowed: "a non-empty name, unique among the prices"}
		}
		seen[p.Name] = true
		f := func(name string) string { return fmt.Sprintf("prices[%s].%s", p.Name, name) }
		switch {
		case p.Seconds < 1 || p.Seconds > MaxLength:
			return &core.FieldError{Field: f("seconds"), Value: fmt.Sprint(p.Seconds), Allowed: fmt.Sprintf("a period of 1..%d seconds", MaxLength)}
		case p.Price < 0:
			return &core.FieldError{Field: f("price"), Value: p.Price.String(), Allowed: "a price >= 0"}
		case p.Granularity < 0 || p.Granularity > MaxLength:
			return &core.FieldError{Field: f("granularity"), Value: fmt.Sprint(p.Granularity), Allowed: fmt.Sprintf("0 (fixed period) or a billing increment of 1..%d seconds", MaxLength)}
		case p.MinCharge < 0 || p.MinCharge > MaxLength:
			return &core.FieldError{Field: f("min_charge"), Value: fmt.Sprint(p.MinCharge), Allowed: fmt.Sprintf("0..%d seconds", MaxLength)}
		}
	}
	return nil
}

// PeriodCount is how much of one period a plan leases, per machine.
type PeriodCount struct {
	// Period is the period's name.
	Period string
	// Seconds is the length of one period.
	Seconds int64
	// Count is the number of whole periods leased (for a pay-as-you-go
	// period: the whole periods of its one lease's billed time).
	Count int64
	// PartialSeconds is billed time beyond Count whole periods; only a
	// pay-as-you-go period has any.
	PartialSeconds int64
	// Cost is what this part of the plan costs for all machines.
	Cost core.Micros
}

// Paid returns the time this part of the plan pays for, per machine.
func (pc PeriodCount) Paid() int64 { return pc.Count*pc.Seconds + pc.PartialSeconds }

// Alternative is one way to cover the project, with what it costs.
type Alternative struct {
	// Plan names it: "all weekly", "all 3 months", or "mix" for a
	// cheapest mix that is not a single-period plan.
	Plan string
	// Total is the cost for all machines.
	Total core.Micros
	// Periods lists the leases per machine, longest period first.
	Periods []PeriodCount
	// PaidSeconds is the time paid for per machine: at least the length.
	PaidSeconds int64
	// Leases is the number of leases per machine (a pay-as-you-go lease
	// counts once, however long it runs).
	Leases int64
	// Chosen marks the plan ChooseTerm picked.
	Chosen bool
}

// Describe writes the plan's leases per machine, longest period first:
// "1 week + 3 days + 5 hours", "1 day + 1h 30m hourly" (a pay-as-you-go
// lease with a partial period).
func (a Alternative) Describe() string {
	parts := make([]string, len(a.Periods))
	for i, pc := range a.Periods {
		if pc.PartialSeconds != 0 {
			parts[i] = FormatSpan(pc.Paid()) + " " + adjective(pc.Period)
		} else {
			parts[i] = countName(pc.Count, pc.Period)
		}
	}
	return strings.Join(parts, " + ")
}

// TermChoice is the cheapest way to cover a project, with the plans it was
// chosen over and why.
type TermChoice struct {
	// Alternative is the chosen plan (Chosen is set).
	Alternative
	// NeededSeconds is the project's length.
	NeededSeconds int64
	// Count is the number of machines.
	Count int
	// Alternatives are every single-period plan and, when it is none of
	// them, the chosen mix: cheapest first, the chosen one ahead of any
	// plan that ties it.
	Alternatives []Alternative
	// Reason explains the choice in a sentence or two.
	Reason string
}

// IdleSeconds returns the time paid for but not needed, per machine.
func (c TermChoice) IdleSeconds() int64 { return c.PaidSeconds - c.NeededSeconds }

// ChooseTerm returns the cheapest mix of consecutive leases that covers
// r.Length on each of r.Count machines.
//
// The search is exact. Fixed periods are whole multiples of their common
// unit u (an hour for hour, day, week and 730-hour month), so covering the
// length with them is covering ceil(Length/u) units: an unbounded covering
// knapsack, solved by dynamic programming over the units — 87,600 cells
// for ten years of hours. A pay-as-you-go lease, whose cost grows with the
// time it covers, then takes whatever the fixed leases leave; every split
// between the two is tried. Among plans of equal cost, fewer leases win,
// then plans with fewer leases of the shortest periods (fewer contract
// changes); the order is lexicographic and additive, so the dynamic
// program keeps it exact too.
//
// Each machine's leases are costed alone and the result multiplied by
// r.Count. Invalid requests return a *core.FieldError; a plan whose cost
// does not fit in int64 micro-units is an error.
func ChooseTerm(r TermRequest) (TermChoice, error) {
	if err := r.Validate(); err != nil {
		return TermChoice{}, err
	}
	slots := make([]PeriodPrice, len(r.Prices))
	copy(slots, r.Prices)
	// Order the tie-break vector from the shortest period up.
	slices.SortStableFunc(slots, func(a, b PeriodPrice) int { return cmpInt(a.Seconds, b.Seconds) })

	best, err := cheapest(r.Length, slots)
	if err != nil {
		return TermChoice{}, err
	}
	chosen, err := best.alternative(slots, r.Count)
	if err != nil {
		return TermChoice{}, err
	}
	chosen.Chosen = true

	alts := make([]Alternative, 0, len(slots)+1)
	found := false
	for _, s := range slots {
		a, err := single(r.Length, s, r.Count)
		if err != nil {
			return TermChoice{}, err
		}
		if !found && slices.Equal(a.Periods, chosen.Periods) {
			found = true
			chosen.Plan = a.Plan
			a = chosen
		}
		alts = append(alts, a)
	}
	if !found {
		chosen.Plan = "mix"
		alts = append(alts, chosen)
	}
	slices.SortStableFunc(alts, compareAlternatives)

	c := TermChoice{Alternative: chosen, NeededSeconds: r.Length, Count: r.Count, Alternatives: alts}
	c.Reason = reason(c, slots)
	return c, nil
}

// PricesFromOffer turns an offer's price plans into periods for
// [ChooseTerm]:
//
//   - the on-demand plan becomes a pay-as-you-go "hour" priced
//     Price × 3600 / Per seconds (half to even; exact when Per is a
//     second, minute or hour), with the plan's granularity and minimum
//     charge;
//   - a committed plan becomes a fixed period of its Term, priced
//     Price × Term / Per seconds and named after its length ("week",
//     "3 months"); a daily, weekly or monthly plan without a Term commits
//     to one day, week or month;
//   - spot is not a term and is skipped.
//
// Time-of-use windows, price series and early-termination rules are not
// terms either and are left out: the prices are list prices. When two plans
// give the same period, the cheaper is kept. The result is ordered from the
// shortest period up. An invalid plan is an error naming it.
func PricesFromOffer(o *core.Offer) ([]PeriodPrice, error) {
	var out []PeriodPrice
	for i := range o.Plans {
		p := &o.Plans[i]
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("offer %s plan %d (%s): %w", o.ID, i, p.Mode, err)
		}
		if p.Mode == core.Spot {
			continue
		}
		term := p.Term
		if term == 0 {
			switch p.Mode {
			case core.Daily:
				term = core.Day.Seconds()
			case core.Weekly:
				term = core.Week.Seconds()
			case core.Monthly:
				term = core.Month.Seconds()
			}
		}
		var pp PeriodPrice
		if term == 0 {
			hourly, ok := mulDiv(int64(p.Price), core.Hour.Seconds(), p.Per.Seconds())
			if !ok {
				return nil, fmt.Errorf("offer %s plan %d (%s): hourly price of %s per %s overflows", o.ID, i, p.Mode, p.Price, p.Per)
			}
			pp = OnDemand(core.Hour, core.Micros(hourly), p.Granularity, p.MinCharge)
		} else {
			price, ok := mulDiv(int64(p.Price), term, p.Per.Seconds())
			if !ok {
				return nil, fmt.Errorf("offer %s plan %d (%s): price of a %d-second term at %s per %s overflows", o.ID, i, p.Mode, term, p.Price, p.Per)
			}
			pp = PeriodPrice{Name: spanName(term), Seconds: term, Price: core.Micros(price)}
		}
		if j := slices.IndexFunc(out, func(q PeriodPrice) bool { return q.Name == pp.Name }); j >= 0 {
			if pp.Price < out[j].Price {
				out[j] = pp
			}
			continue
		}
		out = append(out, pp)
	}
	slices.SortStableFunc(out, func(a, b PeriodPrice) int { return cmpInt(a.Seconds, b.Seconds) })
	return out, nil
}

const inf = math.MaxInt64

// key orders plans: cost, then leases, then counts per slot from the
// shortest period up, all lexicographic. Every part is additive, which is
// what lets the dynamic program respect the order exactly.
type key struct {
	cost   int64 // per machine; inf when it does not fit
	leases int64
	vec    []int32 // base counts per slot
	add    int     // one more lease of this slot, or -1
}

func (k key) count(i int) int64 {
	n := int64(k.vec[i])
	if i == k.add {
		n++
	}
	return n
}

func (k key) less(o key) bool {
	if k.cost != o.cost {
		return k.cost < o.cost
	}
	if k.leases != o.leases {
		return k.leases < o.leases
	}
	for i := range k.vec {
		if a, b := k.count(i), o.count(i); a != b {
			return a < b
		}
	}
	return false
}

// best is the winning split: fixed-period counts plus at most one
// pay-as-you-go lease.
type best struct {
	cost   int64 // per machine
	counts []int64
	payg   int   // slot of the pay-as-you-go lease, or -1
	billed int64 // its billed seconds
}

// cheapest runs the knapsack over slots, ordered by length.
func cheapest(length int64, slots []PeriodPrice) (best, error) {
	k := len(slots)
	var unit int64
	var fixed, payg []int
	for i, s := range slots {
		if s.PayAsYouGo() {
			payg = append(payg, i)
			continue
		}
		fixed = append(fixed, i)
		unit = gcd(unit, s.Seconds)
	}
	var steps int64
	if unit > 0 {
		steps = ceilDiv(length, unit)
		if steps > MaxSteps {
			return best{}, &core.FieldError{Field: "length", Value: fmt.Sprint(length),
				Allowed: fmt.Sprintf("at most %d seconds with fixed periods whose common unit is %d s (%d steps of the search)", MaxSteps*unit, unit, MaxSteps)}
		}
	}
	n := int(steps) + 1
	cost := make([]int64, n)
	leases := make([]int32, n)
	vec := make([]int32, n*k)
	at := func(c int) key { return key{cost: cost[c], leases: int64(leases[c]), vec: vec[c*k : (c+1)*k], add: -1} }
	for c := 1; c < n; c++ {
		bk := key{cost: inf}
		bp := -1
		for _, j := range fixed {
			prev := max(0, c-int(slots[j].Seconds/unit))
			if cost[prev] == inf {
				continue
			}
			cand := at(prev)
			cand.cost = satAdd(cand.cost, int64(slots[j].Price))
			cand.leases++
			cand.add = j
			if bp < 0 || cand.less(bk) {
				bk, bp = cand, prev
			}
		}
		cost[c] = bk.cost
		if bp < 0 {
			continue // every way to cover c units overflows
		}
		leases[c] = int32(bk.leases)
		for i := range k {
			vec[c*k+i] = int32(bk.count(i))
		}
	}

	// Combine: c units of fixed leases, the rest by one pay-as-you-go
	// lease. With no pay-as-you-go price only the full cover counts.
	bk := key{cost: inf}
	bc, bpay, bbilled := -1, -1, int64(0)
	consider := func(c int, p int, billed, extra int64) {
		cand := at(c)
		cand.cost = satAdd(cand.cost, extra)
		if p >= 0 {
			cand.leases++
			cand.add = p
		}
		if bc < 0 || cand.less(bk) {
			bk, bc, bpay, bbilled = cand, c, p, billed
		}
	}
	first := n - 1
	if len(payg) > 0 {
		first = 0
	}
	for c := first; c < n; c++ {
		rest := length - int64(c)*unit
		if rest <= 0 { // the fixed leases cover it all (only c = n-1, when unit > 0)
			consider(c, -1, 0, 0)
			continue
		}
		for _, p := range payg {
			billed, extra, ok := stretch(slots[p], rest)
			if !ok {
				extra = inf
			}
			consider(c, p, billed, extra)
		}
	}
	if bk.cost == inf {
		return best{}, fmt.Errorf("plan: cost of every plan for %s overflows (more than %s per machine)", FormatSpan(length), core.Micros(inf))
	}
	return best{cost: bk.cost, counts: countsOf(bk, k), payg: bpay, billed: bbilled}, nil
}

func countsOf(k key, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = k.count(i)
	}
	return out
}

// alternative turns the winning split into a plan for count machines.
func (b best) alternative(slots []PeriodPrice, count int) (Alternative, error) {
	var a Alternative
	for i := len(slots) - 1; i >= 0; i-- {
		s := slots[i]
		n := b.counts[i]
		if n == 0 {
			continue
		}
		pc := PeriodCount{Period: s.Name, Seconds: s.Seconds}
		var per int64
		if i == b.payg {
			pc.Count, pc.PartialSeconds = b.billed/s.Seconds, b.billed%s.Seconds
			_, per, _ = stretch(s, b.billed) // billed is already rounded; its cost is the lease's
			a.Leases++
		} else {
			pc.Count = n
			per = n * int64(s.Price) // fits: it is part of b.cost
			a.Leases += n
		}
		cost, ok := mulInt(per, int64(count))
		if !ok {
			return Alternative{}, fmt.Errorf("plan: %s for %d machines overflows", pc.Period, count)
		}
		pc.Cost = core.Micros(cost)
		a.Periods = append(a.Periods, pc)
		a.PaidSeconds += pc.Paid()
	}
	total, ok := mulInt(b.cost, int64(count))
	if !ok {
		return Alternative{}, fmt.Errorf("plan: total for %d machines overflows", count)
	}
	a.Total = core.Micros(total)
	return a, nil
}

// single returns the plan that uses s alone: ceil(length/Seconds) fixed
// periods, or one pay-as-you-go lease for the whole length.
func single(length int64, s PeriodPrice, count int) (Alternative, error) {
	a := Alternative{Plan: "all " + adjective(s.Name), Leases: 1}
	pc := PeriodCount{Period: s.Name, Seconds: s.Seconds}
	var per int64
	ok := true
	if s.PayAsYouGo() {
		var billed int64
		billed, per, ok = stretch(s, length)
		pc.Count, pc.PartialSeconds = billed/s.Seconds, billed%s.Seconds
	} else {
		pc.Count = ceilDiv(length, s.Seconds)
		a.Leases = pc.Count
		per, ok = mulInt(int64(s.Price), pc.Count)
	}
	total, ok2 := mulInt(per, int64(count))
	if !ok || !ok2 {
		return Alternative{}, fmt.Errorf("plan: %s for %d seconds on %d machines overflows", a.Plan, length, count)
	}
	pc.Cost = core.Micros(total)
	a.Total = pc.Cost
	a.Periods = []PeriodCount{pc}
	a.PaidSeconds = pc.Paid()
	return a, nil
}

// stretch returns the billed time and cost of one pay-as-you-go lease that
// covers t > 0 seconds: t rounded up to the granularity, at least the
// minimum charge, at Price per Seconds, half to even.
func stretch(s PeriodPrice, t int64) (billed, cost int64, ok bool) {
	billed = ceilDiv(max(t, s.MinCharge), s.Granularity) * s.Granularity
	cost, ok = mulDiv(int64(s.Price), billed, s.Seconds)
	return billed, cost, ok
}

func compareAlternatives(a, b Alternative) int {
	switch {
	case a.Total != b.Total:
		return cmpInt(int64(a.Total), int64(b.Total))
	case a.Chosen != b.Chosen:
		if a.Chosen {
			return -1
		}
		return 1
	case a.Leases != b.Leases:
		return cmpInt(a.Leases, b.Leases)
	case a.Periods[0].Seconds != b.Periods[0].Seconds:
		return cmpInt(b.Periods[0].Seconds, a.Periods[0].Seconds)
	}
	return strings.Compare(a.Plan, b.Plan)
}

// reason explains c: what the chosen plan costs, and what each other plan
// would have cost and left idle.
func reason(c TermChoice, slots []PeriodPrice) string {
	price := make(map[string]PeriodPrice, len(slots))
	for _, s := range slots {
		price[s.Name] = s
	}
	var b strings.Builder
	for i, pc := range c.Periods {
		if i > 0 {
			b.WriteString(" + ")
		}
		s := price[pc.Period]
		if s.PayAsYouGo() && pc.PartialSeconds != 0 {
			fmt.Fprintf(&b, "%s at %s per %s", FormatSpan(pc.Paid()), s.Price, s.Name)
		} else {
			fmt.Fprintf(&b, "%s at %s", countName(pc.Count, pc.Period), s.Price)
		}
	}
	perMachine := int64(c.Total) / int64(c.Count)
	fmt.Fprintf(&b, " = %s", core.Micros(perMachine))
	each := ""
	if c.Count > 1 {
		fmt.Fprintf(&b, " per machine, %s for %d machines", c.Total, c.Count)
		each = " per machine"
	}
	if idle := c.IdleSeconds(); idle == 0 {
		b.WriteString(", no idle time")
	} else {
		fmt.Fprintf(&b, ", %s idle%s", FormatSpan(idle), each)
	}
	for _, a := range c.Alternatives {
		if a.Chosen {
			continue
		}
		if a.Total == c.Total {
			if a.Leases != c.Leases {
				fmt.Fprintf(&b, "; %s would cost the same with %d leases instead of %d", a.Plan, a.Leases, c.Leases)
			} else {
				fmt.Fprintf(&b, "; %s would cost the same with shorter periods", a.Plan)
			}
			continue
		}
		fmt.Fprintf(&b, "; %s would cost %s (+%s)", a.Plan, a.Total, a.Total-c.Total)
		if idle := a.PaidSeconds - c.NeededSeconds; idle > 0 {
			fmt.Fprintf(&b, " and pay for %s idle%s", FormatSpan(idle), each)
		}
	}
	return b.String()
}

// adjective names the single-period plan of a period: "hourly", "weekly".
func adjective(name string) string {
	switch name {
	case "hour":
		return "hourly"
	case "day":
		return "daily"
	case "week":
		return "weekly"
	case "month":
		return "monthly"
	case "year":
		return "yearly"
	}
	return name
}

// countName writes n periods: "1 week", "3 days", "2 × 3 months".
func countName(n int64, name string) string {
	if strings.ContainsAny(name, " 0123456789") {
		return fmt.Sprintf("%d × %s", n, name)
	}
	if n == 1 {
		return "1 " + name
	}
	return fmt.Sprintf("%d %ss", n, name)
}

// spanName names a term by its length in the largest whole unit: "month",
// "3 months", "2 weeks", "90 minutes".
func spanName(sec int64) string {
	units := []core.Period{core.Month, core.Week, core.Day, core.Hour, core.Minute, core.Second}
	for _, u := range units {
		if s := u.Seconds(); sec%s == 0 {
			if sec == s {
				return string(u)
			}
			return fmt.Sprintf("%d %ss", sec/s, u)
		}
	}
	return fmt.Sprintf("%d seconds", sec) // unreachable: every length is whole seconds
}

// FormatSpan writes a length of time in seconds as "16d 10h", "5h",
// "20m 5s"; zero is "0h".
func FormatSpan(sec int64) string {
	if sec == 0 {
		return "0h"
	}
	var parts []string
	for _, u := range []struct {
		s    int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if n := sec / u.s; n > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", n, u.name))
			sec %= u.s
		}
	}
	return strings.Join(parts, " ")
}

// mulDiv returns a*b/c half to even for a, b >= 0 and c > 0, and false
// when it does not fit in int64.
func mulDiv(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	if q, _ := bits.Div64(hi, lo, uint64(c)); q >= math.MaxInt64 {
		return 0, false // rounding up could overflow
	}
	return core.MulDivHalfEven(a, b, c), true
}

// mulInt returns a*b for a, b >= 0, and false on overflow.
func mulInt(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// satAdd adds non-negative a and b, saturating at inf.
func satAdd(a, b int64) int64 {
	if a == inf || b == inf || b > inf-a {
		return inf
	}
	return a + b
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
