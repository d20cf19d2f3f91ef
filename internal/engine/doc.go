// Package engine is the heart of the control loop: Step takes the whole
// state and the time and returns every decision — placements,
// preemptions, deferrals and reservations from sched on the capacity that
// is rented, then acquisitions, releases, idle-ladder alerts and spot
// reclaim handling from fleet for the rest — each with its reason and as
// an audit event. Apply performs the decisions on the state, as the live
// actuator and the simulator both do after their provider calls.
//
// The live server and the simulator call the same Step, so a policy
// proven on a trace is the policy that runs. engine is pure: it must not
// import os, net, database/sql or log, nor read the wall clock.
package engine
