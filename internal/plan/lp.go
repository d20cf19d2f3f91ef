package plan

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// MaxLPNodes bounds the branch-and-bound search of [SolverLP].
const MaxLPNodes = 20_000

// lpRow is one constraint: Σ coef × x ≤ rhs, or = rhs when eq is set.
type lpRow struct {
	idx  []int
	coef []float64
	rhs  float64
	eq   bool
}

// lpModel is one class's linear program. The variables, all >= 0, are the
// base r, and for each hour t: on-demand GPUs o_t; for interruptible work
// with a spot price, spot GPUs s_t and the interruptible GPUs a_t run on
// reserved or on-demand GPUs; for deferrable work that may shift, the
// deferrable GPUs y_t run at t. The rows:
//
//	cover_t:   f_t + a_t + y_t <= r + o_t   (firm, kept and placed work fit)
//	spot_t:    i_t <= a_t + s_t             (interruptible work is served)
//	a_t <= i_t, y_t <= peak - f_t - i_t     (placement caps)
//	window_w:  Σ_{t in w} y_t = D_w         (deferrable work stays in its window)
//	r <= peak                               (or r >= the least base kept)
//
// minimising base × r + Σ od_t o_t + Σ spot_t s_t.
type lpModel struct {
	in               *classInput
	n                int // variables
	cost             []float64
	rows             []lpRow
	o, s, a, y       []int // variable index per hour, -1 when absent
	scale            float64
	integerVariables []int
}

func newLPModel(in *classInput, fixed *int64) *lpModel {
	m := &lpModel{in: in, n: 1}
	H := in.hours
	m.o, m.s, m.a, m.y = make([]int, H), make([]int, H), make([]int, H), make([]int, H)
	newVar := func() int { m.n++; return m.n - 1 }
	shift := in.shifting()
	spot := in.spotting()
	W := in.window
	hasY := make([]bool, H)
	if shift {
		for w0 := 0; w0 < H; w0 += W {
			w1 := min(H, w0+W)
			var D int64
			for t := w0; t < w1; t++ {
				D += in.dfr[t]
			}
			for t := w0; t < w1; t++ {
				hasY[t] = D > 0
			}
		}
	}
	for t := range H {
		m.o[t] = newVar()
		m.s[t], m.a[t], m.y[t] = -1, -1, -1
		if spot && in.intr[t] > 0 {
			m.s[t], m.a[t] = newVar(), newVar()
		}
		if hasY[t] {
			m.y[t] = newVar()
		}
	}
	m.cost = make([]float64, m.n)
	m.cost[0] = float64(in.baseCost)
	for t := range H {
		m.cost[m.o[t]] = float64(in.od[t])
		if m.s[t] >= 0 {
			m.cost[m.s[t]] = float64(in.sp[t])
		}
	}
	m.scale = 1
	for _, c := range m.cost {
		m.scale = max(m.scale, c)
	}
	for j := range m.cost {
		m.cost[j] /= m.scale
	}
	for t := range H {
		// cover_t: -r - o_t + a_t + y_t <= -(f_t [+ i_t without spot vars] [+ dfr_t without y]).
		need := in.firm[t]
		row := lpRow{idx: []int{0, m.o[t]}, coef: []float64{-1, -1}}
		if m.a[t] >= 0 {
			row.idx, row.coef = append(row.idx, m.a[t]), append(row.coef, 1)
		} else {
			need += in.intr[t]
		}
		if m.y[t] >= 0 {
			row.idx, row.coef = append(row.idx, m.y[t]), append(row.coef, 1)
		} else {
			need += in.dfr[t]
		}
		row.rhs = -float64(need)
		m.rows = append(m.rows, row)
		if m.a[t] >= 0 {
			m.rows = append(m.rows,
				lpRow{idx: []int{m.a[t], m.s[t]}, coef: []float64{-1, -1}, rhs: -float64(in.intr[t])},
				lpRow{idx: []int{m.a[t]}, coef: []float64{1}, rhs: float64(in.intr[t])})
		}
		if m.y[t] >= 0 {
			m.rows = append(m.rows, lpRow{idx: []int{m.y[t]}, coef: []float64{1}, rhs: float64(max(0, in.peak-in.firm[t]-in.intr[t]))})
		}
	}
	if shift {
		for w0 := 0; w0 < H; w0 += W {
			w1 := min(H, w0+W)
			row := lpRow{eq: true}
			var D int64
			for t := w0; t < w1; t++ {
				D += in.dfr[t]
				if m.y[t] >= 0 {
					row.idx, row.coef = append(row.idx, m.y[t]), append(row.coef, 1)
				}
			}
			if D > 0 {
				row.rhs = float64(D)
				m.rows = append(m.rows, row)
			}
		}
	}
	if fixed != nil {
		m.rows = append(m.rows,
			lpRow{idx: []int{0}, coef: []float64{1}, rhs: float64(max(*fixed, in.rMax))},
			lpRow{idx: []int{0}, coef: []float64{-1}, rhs: -float64(*fixed)})
	} else {
		m.rows = append(m.rows, lpRow{idx: []int{0}, coef: []float64{1}, rhs: float64(in.rMax)})
	}
	m.integerVariables = make([]int, m.n)
	for j := range m.n {
		m.integerVariables[j] = j
	}
	return m
}

// solve returns the LP optimum (in scaled cost) and x, with extra rows.
func (m *lpModel) solve(extra []lpRow) (float64, []float64, error) {
	rows := append(m.rows[:len(m.rows):len(m.rows)], extra...)
	slacks := 0
	for _, r := range rows {
		if !r.eq {
			slacks++
		}
	}
	nc := m.n + slacks
	A := mat.NewDense(len(rows), nc, nil)
	b := make([]float64, len(rows))
	c := make([]float64, nc)
	copy(c, m.cost)
	sl := m.n
	for i, r := range rows {
		sign := 1.0
		if r.rhs < 0 {
			sign = -1
		}
		for k, j := range r.idx {
			A.Set(i, j, A.At(i, j)+sign*r.coef[k])
		}
		if !r.eq {
			A.Set(i, sl, sign)
			sl++
		}
		b[i] = sign * r.rhs
	}
	f, x, err := lp.Simplex(c, A, b, 1e-10, nil)
	if err != nil {
		return 0, nil, err
	}
	return f, x[:m.n], nil
}

// solveLP solves the class's LP and branches on fractional counts until
// every count is whole. The integer solution is then re-priced exactly.
func solveLP(in *classInput, fixed *int64) (classSolution, error) {
	if in.hours > MaxLPHours {
		return classSolution{}, fmt.Errorf("%w: the LP takes at most %d hours (the series has %d); use the decomposed solver", ErrNotApplicable, MaxLPHours, in.hours)
	}
	m := newLPModel(in, fixed)
	best := math.Inf(1)
	var bestX []float64
	nodes := 0
	const intTol = 1e-6
	var branch func(extra []lpRow) error
	branch = func(extra []lpRow) error {
		nodes++
		if nodes > MaxLPNodes {
			return fmt.Errorf("plan: LP branch and bound passed %d nodes", MaxLPNodes)
		}
		f, x, err := m.solve(extra)
		if errors.Is(err, lp.ErrInfeasible) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("plan: LP: %w", err)
		}
		if f >= best-1e-9*max(1, math.Abs(best)) {
			return nil
		}
		// Branch on the most fractional count.
		j, frac := -1, 0.0
		for _, v := range m.integerVariables {
			d := math.Abs(x[v] - math.Round(x[v]))
			if d > intTol && d > frac {
				j, frac = v, d
			}
		}
		if j < 0 {
			best, bestX = f, x
			return nil
		}
		lo := math.Floor(x[j])
		if err := branch(append(extra[:len(extra):len(extra)], lpRow{idx: []int{j}, coef: []float64{1}, rhs: lo})); err != nil {
			return err
		}
		return branch(append(extra[:len(extra):len(extra)], lpRow{idx: []int{j}, coef: []float64{-1}, rhs: -(lo + 1)}))
	}
	if err := branch(nil); err != nil {
		return classSolution{}, err
	}
	if bestX == nil {
		return classSolution{}, errors.New("plan: LP found no integer solution")
	}
	return m.solution(bestX)
}

// solution rounds the LP's integer solution, checks it in integers and
// prices it exactly.
func (m *lpModel) solution(x []float64) (classSolution, error) {
	in := m.in
	val := func(j int) int64 {
		if j < 0 {
			return 0
		}
		return int64(math.Round(x[j]))
	}
	H := in.hours
	s := classSolution{r: val(0), od: make([]int64, H), spot: make([]int64, H), place: make([]int64, H), reserved: make([]int64, H), leased: make([]int64, H)}
	total, ok := mulInt(s.r, in.baseCost)
	if !ok {
		return s, ErrOverflow
	}
	for t := range H {
		s.od[t], s.spot[t] = val(m.o[t]), val(m.s[t])
		s.place[t] = in.dfr[t]
		if m.y[t] >= 0 {
			s.place[t] = val(m.y[t])
		}
		kept := in.intr[t]
		if m.a[t] >= 0 {
			kept = val(m.a[t])
		}
		load := in.firm[t] + kept + s.place[t]
		if load > s.r+s.od[t] || kept+s.spot[t] < in.intr[t] {
			return s, fmt.Errorf("plan: LP solution does not cover hour %d", t)
		}
		s.reserved[t] = min(load, s.r)
		var ok1, ok2 bool
		total, ok1 = mulAdd(total, s.od[t], in.od[t])
		total, ok2 = mulAdd(total, s.spot[t], spotPrice(in, t))
		if !ok1 || !ok2 {
			return s, ErrOverflow
		}
	}
	s.cost = total
	return s, nil
}
