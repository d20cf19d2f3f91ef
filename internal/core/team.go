package core

// Quota is a team's share of one GPU class, in the style of Kueue's
// ClusterQueue: a guaranteed amount, how much more it may borrow from its
// cohort, and how much of its guarantee it lends to others when idle.
type Quota struct {
	// GPUClass is a GPU model or a class name such as "A100".
	GPUClass string
	// Guaranteed, BorrowLimit and LendLimit are in milli-GPUs. A negative
	// BorrowLimit or LendLimit means unlimited.
	Guaranteed  Milli
	BorrowLimit Milli
	LendLimit   Milli
}

// Team is a group that submits jobs and pays for them.
type Team struct {
	ID     string
	Name   string
	Cohort string
	// Weight is the team's fair-share weight (default 1).
	Weight int64
	// MonthlyBudget caps what the team may spend in a calendar month;
	// zero means no budget.
	MonthlyBudget Micros
	Quotas        []Quota
	// UnitLimit is the most units (one per shard; a job without shards
	// is one) the team's unfinished jobs may have together: a quota on
	// queued work, so that one request cannot give every tick of the loop
	// a million units to go through. 0 is DefaultUnitLimit.
	UnitLimit int64
}

// DefaultUnitLimit is a team's UnitLimit when it sets none; MaxUnitLimit
// is the most it may set.
const (
	DefaultUnitLimit = 10_000
	MaxUnitLimit     = 1_000_000
)

// Units returns the team's UnitLimit, DefaultUnitLimit if it sets none.
func (t *Team) Units() int64 {
	if t.UnitLimit == 0 {
		return DefaultUnitLimit
	}
	return t.UnitLimit
}
