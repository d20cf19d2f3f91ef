// Package policy is the one description of how the fleet is run: every
// knob of the engine (tiers' wait targets, billing modes, time-of-use
// shifting, the reserved base, the idle ladder, spot fallback,
// consolidation, preemption, backfill, fair share) in one Policy value,
// read from one YAML file by both "gpufleet serve --policy F" and
// "gpufleet sim --policy F", with the baselines the simulator compares
// against as named presets of the same type.
//
// A Policy turns into what the engine runs with Engine; nothing else
// decides what a knob means. policy is pure: it imports core and the
// engine's configuration types, never os, net, database/sql or log; the
// caller reads the file.
package policy
