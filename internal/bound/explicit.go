package bound

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Program is the LP relaxation written out in full — the primal whose
// optimum LP's dual ascent bounds from below — so that an exact solver
// can check how close the ascent came: WriteMPS hands it to any LP
// solver (CLP, HiGHS, GLPK), and the tests solve small ones with gonum's
// simplex. It is built from the same classes and markets as LP.
//
// Columns are y (a class's GPU-hours in a slot, on the cheapest flexible
// market it may use there, or on a committed market) and x (GPUs of a
// committed term starting at a slot); rows are each class's work (=),
// its rate in each slot (<=) and each committed market's capacity in
// each slot (<=). Every variable is >= 0.
type Program struct {
	Rows []Row
	Cols []Col
}

// Row is a constraint: Sense 'E' (= RHS) or 'L' (<= RHS).
type Row struct {
	Name  string
	Sense byte
	RHS   float64
}

// Col is a variable: its cost per unit and its coefficients by row.
type Col struct {
	Name  string
	Cost  float64
	Rows  []int
	Coefs []float64
}

// Explicit builds in's LP relaxation as a Program.
func Explicit(in Input, opt Options) (*Program, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	p, _, err := build(in, opt)
	if err != nil {
		return nil, err
	}
	prog := &Program{}
	row := func(name string, sense byte, rhs float64) int {
		prog.Rows = append(prog.Rows, Row{Name: name, Sense: sense, RHS: rhs})
		return len(prog.Rows) - 1
	}
	// Capacity rows, one per committed market and slot.
	capRow := make([][]int, len(p.blocks))
	for bi := range p.blocks {
		capRow[bi] = make([]int, p.slots)
		for t := range p.slots {
			capRow[bi][t] = row(fmt.Sprintf("cap_%d_%d", bi, t), 'L', 0)
		}
	}
	for ki, c := range p.classes {
		work := row(fmt.Sprintf("work_%d", ki), 'E', c.work)
		for i, cp := range c.cap {
			if cp <= 0 {
				continue
			}
			t := c.a + i
			rate := row(fmt.Sprintf("rate_%d_%d", ki, t), 'L', cp)
			if c.flexP != nil && !math.IsInf(c.flexP[t], 1) {
				prog.Cols = append(prog.Cols, Col{Name: fmt.Sprintf("yf_%d_%d", ki, t), Cost: c.flexP[t],
					Rows: []int{work, rate}, Coefs: []float64{1, 1}})
			}
			for _, bi := range p.bySig[c.sig] {
				prog.Cols = append(prog.Cols, Col{Name: fmt.Sprintf("yc_%d_%d_%d", ki, t, bi),
					Rows: []int{work, rate, capRow[bi][t]}, Coefs: []float64{1, 1, 1}})
			}
		}
	}
	// Terms: one may start at any slot whose window the dual constrains
	// (a term starting later is covered by the last one: its slots are a
	// subset and prices are >= 0).
	for bi, b := range p.blocks {
		for s := range max(p.slots-b.L+1, 1) {
			col := Col{Name: fmt.Sprintf("x_%d_%d", bi, s), Cost: b.P * p.hours}
			for t := s; t < min(s+b.L, p.slots); t++ {
				col.Rows = append(col.Rows, capRow[bi][t])
				col.Coefs = append(col.Coefs, -p.hours)
			}
			prog.Cols = append(prog.Cols, col)
		}
	}
	return prog, nil
}

// WriteMPS writes the program in free MPS, objective row "cost".
func (p *Program) WriteMPS(w io.Writer) error {
	bw := bufio.NewWriter(w)
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', 17, 64) }
	fmt.Fprintln(bw, "NAME gpufleet-lp-bound")
	fmt.Fprintln(bw, "ROWS")
	fmt.Fprintln(bw, " N cost")
	for _, r := range p.Rows {
		fmt.Fprintf(bw, " %c %s\n", r.Sense, r.Name)
	}
	fmt.Fprintln(bw, "COLUMNS")
	for _, c := range p.Cols {
		if c.Cost != 0 {
			fmt.Fprintf(bw, " %s cost %s\n", c.Name, num(c.Cost))
		}
		for i, r := range c.Rows {
			fmt.Fprintf(bw, " %s %s %s\n", c.Name, p.Rows[r].Name, num(c.Coefs[i]))
		}
	}
	fmt.Fprintln(bw, "RHS")
	for _, r := range p.Rows {
		if r.RHS != 0 {
			fmt.Fprintf(bw, " rhs %s %s\n", r.Name, num(r.RHS))
		}
	}
	fmt.Fprintln(bw, "ENDATA")
	return bw.Flush()
}
