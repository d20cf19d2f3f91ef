// Package plan does gpufleet's offline planning: given prices and a known
// amount of work, it says how to rent for it at the least cost, and why.
//
// The first planner is lease-term choice ([ChooseTerm]): for a project of a
// known length on N machines, the cheapest mix of consecutive leases —
// hourly, daily, weekly, monthly or any committed term — that covers it,
// found exactly by a covering knapsack over the prices' common time unit,
// and set against every single-period plan ("all hourly", "all monthly") so
// the choice can be checked.
//
// [PlanJob] sizes a job from a short benchmark: for each benched GPU model
// and count, the modelled throughput (linear, an efficiency per doubling,
// or Amdahl), the duration, the cheapest lease mix on whole machines, the
// idle share, and the cheapest option that meets the deadline.
//
// [PlanPortfolio] plans renting for an hourly demand series per GPU class:
// a committed base per class, on-demand burst, spot for interruptible work
// (priced with the expected reclaim overhead) and deferrable work shifted
// within its window, with baselines (all on demand, all monthly, peak
// sized) and ±20% sensitivity. Three solvers find the same least cost: the
// load-duration curve (exact, no spot or shifting), a decomposed solver
// (exact for the whole model at any size: convex search over the base,
// greedy placement per window) and an LP with branch and bound on gonum's
// simplex (the reference, for small series). Optionally the on-demand
// burst is then covered with short committed terms where cheaper
// ([BurstLease]). [ParseDemandCSV] reads the demand; docs/planner.md
// describes the methods and the format.
//
// Like the other decision packages, plan is pure: prices, lengths and
// counts come in as arguments, a decision with its reason comes out. It
// does no I/O and never reads the clock, so the CLI, the server and the
// simulator get the same answer for the same question. Money is integer
// micro-units ([core.Micros]) throughout; the only rounding is half to even,
// where a price is turned pro rata into a shorter time.
package plan
