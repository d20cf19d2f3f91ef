// Package ledger reads what the fleet has spent from the store: the
// leases held in a range and the runs on them (Load), the usage report
// over a range (Over), and each team's spend this calendar month
// (MonthToDate). The usage report of the API and the CLI, the
// dashboard's overview and the control loop's team budgets all take their
// money from these functions, so what the dashboard shows, what "gpufleet
// report usage" prints and what the budgets see agree to the micro-unit.
//
// It reads the store and computes with billing; it depends on no layer
// above the store, so both internal/api and internal/server use it.
package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Load reads what billing.UsageReport needs for [from, to) as of now
// from a store (or one of its transactions) and the catalog: the leases
// held in the range (selected by the store, not the whole history) and
// every run on them since each began, finished or in progress. A lease's
// charges in the range are its allocation held to the range's end minus
// its allocation held to its start, and a run that ended before the range
// is part of both, so the runs are read from the earliest launch of these
// leases, not from the range's start: that is what makes consecutive
// ranges add up, team by team, to the micro-unit. The GPU readings are
// left to the caller (busy time only, never cost).
func Load(ctx context.Context, a store.Aggregates, cat *pricing.Catalog, from, to, now time.Time) (billing.UsageInput, error) {
	in := billing.UsageInput{From: from, To: to, Now: now}
	end := to
	if now.Before(end) {
		end = now
	}
	if !end.After(from) {
		return in, nil // a range after now: nothing is incurred in it yet
	}
	held := map[string]bool{}
	var earliest time.Time
	for cursor := ""; ; {
		page, err := a.Leases().ListLeases(ctx, store.LeaseFilter{HeldFrom: from, HeldTo: end, Limit: store.MaxLimit, Cursor: cursor})
		if err != nil {
			return in, fmt.Errorf("usage: %w", err)
		}
		for _, l := range page.Items {
			o, err := cat.Offer(l.OfferID)
			if err != nil {
				return in, fmt.Errorf("usage: lease %s: %w", l.ID, err)
			}
			terms, err := billing.Terms(o, &l.Lease, l.End, l.State == core.LeaseReclaimed)
			if err != nil {
				return in, fmt.Errorf("usage: lease %s: %w", l.ID, err)
			}
			for _, t := range terms {
				in.Leases = append(in.Leases, billing.UsageLease{ID: l.ID, Plan: t.Plan, GPUs: o.GPUs, SliceMilli: o.SliceMilli, Start: t.Span.Start, End: t.Span.End, Reclaimed: t.Span.Reclaimed})
			}
			held[l.ID] = true
			if first := l.FirstStart(); earliest.IsZero() || first.Before(earliest) {
				earliest = first
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(in.Leases) == 0 {
		return in, nil
	}
	add := func(runs []store.Run) {
		for _, r := range runs {
			for _, part := range r.Parts {
				if held[part.LeaseID] {
					in.Runs = append(in.Runs, billing.UsageRun{Team: r.Team, LeaseID: part.LeaseID, GPUs: part.GPUs, MilliPerGPU: r.MilliPerGPU, From: r.Start, To: r.End})
				}
			}
		}
	}
	runs, err := a.Events().ListRuns(ctx, store.RunFilter{From: earliest, To: end})
	if err != nil {
		return in, fmt.Errorf("usage: %w", err)
	}
	if len(runs) >= store.MaxRuns {
		// The list may be cut short: a missing run would move money
		// between lines, so refuse rather than report it.
		return in, fmt.Errorf("usage: %w", &core.FieldError{Field: "from", Value: from.UTC().Format(time.RFC3339),
			Allowed: fmt.Sprintf("a range whose leases hold fewer than %d finished runs since the earliest launched (%s)", store.MaxRuns, earliest.UTC().Format(time.RFC3339))})
	}
	add(runs)
	live, err := a.Units().ListRunning(ctx)
	if err != nil {
		return in, fmt.Errorf("usage: %w", err)
	}
	for i := range live {
		if live[i].Start.IsZero() || !live[i].Start.Before(end) {
			live[i].Parts = nil // not started by the end of the range
		}
	}
	add(live)
	return in, nil
}

// Over is billing.UsageReport of in over [from, in.To); an empty range
// (from at the month's or day's first instant) is an empty report.
func Over(in billing.UsageInput, from time.Time) (billing.UsageTotals, error) {
	if !in.To.After(from) {
		return billing.UsageTotals{From: from, To: in.To, Idle: billing.UsageLine{Team: billing.IdleTeam}}, nil
	}
	in.From = from
	return billing.UsageReport(in)
}

// Month is what the month's ledger is computed from: the usage input of
// [Start, Now), Start the first instant of Now's calendar month in UTC
// (billing.MonthBounds), as of Now.
type Month struct {
	Start, Now time.Time
	Input      billing.UsageInput
}

// LoadMonth loads the month to date as of now (taken in UTC): Load over
// [month start, now).
func LoadMonth(ctx context.Context, a store.Aggregates, cat *pricing.Catalog, now time.Time) (Month, error) {
	now = now.UTC()
	start, _ := billing.MonthBounds(now, time.UTC)
	in, err := Load(ctx, a, cat, start, now, now)
	if err != nil {
		return Month{}, err
	}
	return Month{Start: start, Now: now, Input: in}, nil
}

// Totals is the usage report of the month to date.
func (m Month) Totals() (billing.UsageTotals, error) { return Over(m.Input, m.Start) }

// Spent is each team's cost in a usage report: its line's Cost, the
// team's share of the charges incurred in the report's range (the idle
// line is nobody's). A team with no line has spent nothing, and no team
// has spent less than nothing: a line's cost is the difference of two
// rounded allocations (to the range's end and to its start), which is
// -1 µ for a team whose share in the range rounds to nothing, and a
// budget, like the stored loop state, counts spend from zero.
func Spent(u billing.UsageTotals) map[string]core.Micros {
	out := make(map[string]core.Micros, len(u.Lines))
	for _, l := range u.Lines {
		out[l.Team] = max(l.Cost, 0)
	}
	return out
}

// MonthToDate is each team's spend this calendar month (UTC) as of now:
// Spent of the month's Totals, the figure the dashboard's budgets show
// and the usage report's team lines over [month start, now): MonthSpent
// of the leases and runs LoadMonth reads, the function a loop without a
// store (the simulator, through Book) computes its budgets' spend with.
func MonthToDate(ctx context.Context, a store.Aggregates, cat *pricing.Catalog, now time.Time) (map[string]core.Micros, error) {
	m, err := LoadMonth(ctx, a, cat, now)
	if err != nil {
		return nil, err
	}
	return MonthSpent(m.Now, m.Input.Leases, m.Input.Runs)
}
