// Package plan does gpufleet's offline planning: given prices and a known
// amount of work, it says how to rent for it at the least cost, and why.
//
// The first planner is lease-term choice ([ChooseTerm]): for a project of a
// known length on N machines, the cheapest mix of consecutive leases —
// hourly, daily, weekly, monthly or any committed term — that covers it,
// found exactly by a covering knapsack over the prices' common time unit,
// and set against every single-period plan ("all hourly", "all monthly") so
// the choice can be checked. Portfolio optimisation across offers and
// demand estimated from benchmarks will join it here.
//
// Like the other decision packages, plan is pure: prices, lengths and
// counts come in as arguments, a decision with its reason comes out. It
// does no I/O and never reads the clock, so the CLI, the server and the
// simulator get the same answer for the same question. Money is integer
// micro-units ([core.Micros]) throughout; the only rounding is half to even,
// where a price is turned pro rata into a shorter time.
package plan
