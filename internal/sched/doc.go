// Package sched decides where jobs run on the capacity that is already
// rented: which pending work is admitted (tiers, fair share across teams,
// quotas with borrowing and lending in cohorts, budgets), where each unit
// goes (filters, then cost- and fragmentation-aware scoring, gangs whole
// on one machine), what is preempted to make room (the smallest loss of
// work since the victims' last checkpoints, only downwards or of borrowed
// work), what is backfilled ahead of a reservation, and what waits for a
// cheaper time-of-use window.
//
// Schedule is a pure function of its State: no I/O, no wall clock, no
// global randomness. The live server and the simulator call the same
// function, so a policy proven on a trace is the policy that runs.
//
// sched must not import os, net, database/sql, log or any package that
// does I/O (internal/arch enforces this).
package sched
