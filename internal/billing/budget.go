package billing

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// AlertShareBP is the share of a budget, in basis points, at which a team
// is warned: 80%.
const AlertShareBP = 8000

// BudgetStatus is where a team stands against its monthly budget.
type BudgetStatus struct {
	Team   string
	Budget core.Micros
	Spent  core.Micros
	// Remaining is Budget - Spent (negative when over).
	Remaining core.Micros
	// BurnPerHour is the mean spend per hour so far this month.
	BurnPerHour core.Micros
	// Projected is the month-end spend if the burn rate holds.
	Projected core.Micros
	// SpentBP is Spent/Budget in basis points.
	SpentBP int64
	// Alert is set at AlertShareBP of the budget, Exhausted at 100%.
	Alert, Exhausted bool
	// ExhaustsAt is when the budget runs out at the current burn rate;
	// zero if it does not within the month.
	ExhaustsAt time.Time
}

// MonthBounds returns the calendar month containing now in loc.
func MonthBounds(now time.Time, loc *time.Location) (start, end time.Time) {
	lt := now.In(loc)
	start = time.Date(lt.Year(), lt.Month(), 1, 0, 0, 0, 0, loc)
	return start, start.AddDate(0, 1, 0)
}

// Budget returns a team's budget status given what it has spent since
// monthStart, as of now. A team without a budget never alerts.
func Budget(t core.Team, spent core.Micros, monthStart, monthEnd, now time.Time) BudgetStatus {
	st := BudgetStatus{Team: t.ID, Budget: t.MonthlyBudget, Spent: spent, Remaining: t.MonthlyBudget - spent}
	elapsed := int64(now.Sub(monthStart) / time.Second)
	total := int64(monthEnd.Sub(monthStart) / time.Second)
	if elapsed > 0 {
		st.BurnPerHour = core.Micros(core.MulDivHalfEven(int64(spent), 3600, elapsed))
		st.Projected = core.Micros(core.MulDivHalfEven(int64(spent), total, elapsed))
	} else {
		st.Projected = spent
	}
	if t.MonthlyBudget <= 0 {
		return st
	}
	st.SpentBP = core.MulDivHalfEven(int64(spent), bpOne, int64(t.MonthlyBudget))
	st.Alert = st.SpentBP >= AlertShareBP
	st.Exhausted = spent >= t.MonthlyBudget
	if st.Exhausted {
		st.ExhaustsAt = now
	} else if spent > 0 && elapsed > 0 {
		// Seconds until the remaining budget burns at spent/elapsed.
		left := core.MulDivHalfEven(int64(st.Remaining), elapsed, int64(spent))
		if at := now.Add(time.Duration(left) * time.Second); at.Before(monthEnd) {
			st.ExhaustsAt = at
		}
	}
	return st
}
