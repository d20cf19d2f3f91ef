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
}
