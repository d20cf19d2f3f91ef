package server

import (
	"context"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store"
)

// ledgerCache is the month-to-date spend the loop last read, and when
// to read it again.
type ledgerCache struct {
	// cat resolves the leases' offers for the ledger: the loop's
	// catalog (Config.Offers), made on first use.
	cat *pricing.Catalog
	// spent is each team's spend in the month of the last read; nil
	// until a read succeeds.
	spent map[string]core.Micros
	// refresh is the rule the simulator reads its spend by too.
	refresh ledger.Refresh
}

// setSpent sets st.Spent, what the engine's team budgets see (fleet stops
// renting for a team at its cap, the scheduler places none of its work,
// and a team past 80% gets a "budget" alert), to each team's spend this
// calendar month as of now: ledger.MonthToDate, the function the
// dashboard's overview budgets and GET /api/v1/reports/usage (gpufleet
// report usage) use, with the month starting at the first instant of
// now's month in UTC as the overview's does. A team with no charges this
// month has spent 0.
//
// Reading the ledger costs a read of every lease held this month and the
// runs on them, so the loop does not do it every tick: it reads it when
// ledger.Refresh says so, the rule the simulator computes its spend by
// (on the first tick, on a new month's first tick, when the launched
// leases changed since the last read, else once ledger.RefreshEvery of
// the loop's clock has passed). Between reads st.Spent is the last
// one's: the ledger as of at most RefreshEvery (or one tick, if ticks are
// further apart) before now, short of the dashboard's by at most what the
// already launched leases accrued meanwhile; what the step itself rents
// it counts on top as expected cost (fleet.Acquire).
//
// A failed read (a lease of an offer the catalog no longer has, a store
// error) does not fail the tick: it is logged, the budgets keep the last
// spend read this month (or, with none, the spend the loop saved last,
// st.Spent as loaded), and the read is tried again after RefreshEvery or
// a lease change.
func (l *Loop) setSpent(ctx context.Context, st *engine.State, now time.Time) {
	c := &l.ledger
	if c.cat == nil {
		c.cat = &pricing.Catalog{Offers: l.cfg.Offers}
		if len(l.cfg.Offers) > 0 {
			c.cat.Currency = l.cfg.Offers[0].Currency
		}
	}
	leases := ledger.LaunchedLeases(st.Leases)
	if c.refresh.Due(now, leases) {
		var spent map[string]core.Micros
		err := l.cfg.Store.Tx(ctx, func(tx store.Tx) error {
			var err error
			spent, err = ledger.MonthToDate(ctx, tx, c.cat, now)
			return err
		})
		if err != nil {
			l.cfg.Log.Warn("control loop: reading the month's spend for team budgets failed; the budgets keep the last spend read", "err", err)
			if !ledger.MonthStart(now).Equal(c.refresh.Month()) {
				c.spent = nil // last month's: no use for this one
			}
		} else {
			c.spent = spent
		}
		c.refresh.Read(now, leases)
	}
	switch {
	case c.spent != nil:
		// A copy: the engine and the store must not share the cache.
		st.Spent = make(map[string]core.Micros, len(c.spent))
		for t, m := range c.spent {
			st.Spent[t] = m
		}
	case st.Spent == nil:
		st.Spent = map[string]core.Micros{}
	}
}
