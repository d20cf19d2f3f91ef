// Package engine is the heart of the control loop: Step takes the whole
// state and the time and returns every decision — placements,
// preemptions, deferrals and reservations from sched on the capacity that
// is rented, then acquisitions, releases, idle-ladder alerts and spot
// reclaim handling from fleet for the rest — each with its reason and as
// an audit event. Apply performs the decisions on the state, as the live
// actuator and the simulator both do after their provider calls.
//
// Step keeps its picture of the fleet in the State between calls and
// every change the engine makes to a unit keeps it up to date (view.go),
// so a step costs about what changed, not the fleet's size. A caller
// changes units only through the engine's methods (or by appending new
// ones), so the picture cannot go stale from outside.
//
// The live server and the simulator call the same Step, so a policy
// proven on a trace is the policy that runs. engine is pure: it must not
// import os, net, database/sql or log, nor read the wall clock.
package engine
