package audit

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// IdleTeam is the team of the lines that hold paid capacity nobody used
// (billing.IdleTeam's name).
const IdleTeam = "(idle)"

// Report is an audit: the range, one PeriodReport per period, the totals
// and every recommendation.
type Report struct {
	From, To time.Time
	Location string
	Period   PeriodKind
	// Team is set for a team's report.
	Team     string
	Currency core.Currency
	Config   Config
	Periods  []PeriodReport
	// Total sums the periods.
	Total Summary
	// Recommendations are every period's, by saving (largest first), then
	// id.
	Recommendations []Recommendation
	// Saving sums the recommendations' savings.
	Saving core.Micros
}

// Summary is the totals of a period (or of the report).
type Summary struct {
	// PaidMilliSeconds is the billed GPU time (milli-GPU-seconds); the
	// allocated and idle parts add up to it. In a team's report, with no
	// idle lines, it equals the allocated time.
	PaidMilliSeconds      int64
	AllocatedMilliSeconds int64
	// BusyMilliSeconds is allocated time × measured utilization, over the
	// runs that have samples.
	BusyMilliSeconds int64
	// Cost is the bill of the period (team's report: the team's allocated
	// cost); AllocatedCost + IdleCost = Cost exactly.
	Cost, AllocatedCost, IdleCost core.Micros
	ZombiesFound, ZombiesReleased int
	Alerts                        int
}

// Line is one team's use of one GPU model in a period. The idle line of a
// model has Team IdleTeam and the paid capacity nobody used.
type Line struct {
	Team     string
	GPUModel string
	// MilliSeconds is allocated GPU time (idle time on an idle line).
	MilliSeconds     int64
	BusyMilliSeconds int64
	Cost             core.Micros
	ZombiesFound     int
	ZombiesReleased  int
	Alerts           int
}

// JobLine is one job's use in a period, on the GPU model it used most.
type JobLine struct {
	JobID    string
	Team     string
	Tier     core.Tier
	GPUModel string
	// GPUs and MemAskedMiB are what the job asked for each GPU.
	GPUs        int
	MemAskedMiB int64
	// PeakMemMiB is the most memory a sample showed on the job's GPUs
	// (exclusive GPUs only); -1 when unknown.
	PeakMemMiB int64
	// UtilP95Pct is the 95th percentile of its GPUs' utilization samples;
	// -1 without samples.
	UtilP95Pct int
	// WorkingGPUs is the most GPUs of one run that showed work; -1 when a
	// GPU of the run had no sample.
	WorkingGPUs           int
	Samples               int
	AllocatedMilliSeconds int64
	BusyMilliSeconds      int64
	// Cost is the job's allocated cost in the period (every model).
	Cost core.Micros
}

// Kind is a kind of recommendation.
type Kind string

// The recommendation kinds.
const (
	RightSizeMemory Kind = "right-size-memory"
	RightSizeCount  Kind = "right-size-count"
	ModelDowngrade  Kind = "model-downgrade"
	LeaseChange     Kind = "lease-change"
	OffPeak         Kind = "off-peak"
)

// Evidence is one number behind a recommendation.
type Evidence struct {
	Name  string
	Value string
}

// Superseded is a recommendation a larger one for the same job replaced:
// only one is counted.
type Superseded struct {
	Kind   Kind
	Action string
	Saving core.Micros
}

// Recommendation is one change with the saving it is worth in its period:
// the cost of the period's observed work as it ran minus its cost with the
// change.
type Recommendation struct {
	// ID is kind/period/subject: unique in a report.
	ID     string
	Kind   Kind
	Period string
	// Team is the job's; empty for a fleet-wide change (lease-change).
	Team string
	// Subject is the job id, or the GPU model of a lease change.
	Subject    string
	Action     string
	Saving     core.Micros
	Evidence   []Evidence
	Supersedes []Superseded
}

// PeriodReport is one period of an audit.
type PeriodReport struct {
	Window
	Summary Summary
	// Lines are by team then GPU model, the idle lines last.
	Lines []Line
	// Jobs are by job id.
	Jobs            []JobLine
	Recommendations []Recommendation
	Saving          core.Micros
}

// Add adds o's figures to s.
func (s *Summary) Add(o Summary) {
	s.PaidMilliSeconds += o.PaidMilliSeconds
	s.AllocatedMilliSeconds += o.AllocatedMilliSeconds
	s.BusyMilliSeconds += o.BusyMilliSeconds
	s.Cost += o.Cost
	s.AllocatedCost += o.AllocatedCost
	s.IdleCost += o.IdleCost
	s.ZombiesFound += o.ZombiesFound
	s.ZombiesReleased += o.ZombiesReleased
	s.Alerts += o.Alerts
}
