// Package billing is gpufleet's exact billing engine: what a lease costs
// under its price plan, over its whole life or over any interval; the
// ledger of charges and the vouchers that offset them; how each lease's
// bill is allocated to the teams that used it, with the unused part as an
// explicit idle line; and where each team stands against its budget.
//
// All amounts are core.Micros. Products of prices, time-of-use multipliers
// and seconds are accumulated exactly in 128 bits and rounded half to even
// once per line, so a bill is reproducible to the micro-unit and its
// allocation sums exactly to it.
//
// billing is a decision package: it does no I/O and never reads the wall
// clock; time comes in as arguments.
package billing
