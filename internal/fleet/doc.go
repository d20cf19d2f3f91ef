// Package fleet decides what is rented: which machines to acquire for the
// work the scheduler could not place (the cheapest offer and billing mode
// per useful GPU-hour, spot only for interruptible work, committed terms
// only when the work is long enough to fill them, within team budgets),
// when to release idle machines (just before their next billing boundary,
// never inside a committed term), the idle-GPU ladder (alert, notify,
// act), and how spot reclaims are survived (checkpoint, requeue, fall back
// to on-demand after repeated reclaims or when a deadline is at risk).
//
// Like sched, fleet is pure: state and now in, decisions with reasons
// out. It must not import os, net, database/sql or log.
package fleet
