// Package agent is gpufleet's node agent: the process on each GPU machine
// that reads its GPUs (package gpu), runs the jobs the server places there
// (package runner), keeps every sample and job event in an on-disk outbox
// while the server is away (package spool) and drains it in order over
// the link (package link).
//
// Run wires them: it samples the GPUs every SampleInterval, attributing
// each device's processes to the running jobs by process group (the input
// of the zombie rule), spools samples and events, heartbeats and fetches
// commands through the Uplink, and on shutdown stops its jobs with the
// checkpoint signal so they resume elsewhere. When the Uplink can ship
// logs (link.LogSender), the jobs' local log files are sent by byte
// offset, the files themselves holding what the server has not yet
// acknowledged; a change to a running job's checkpoint directory is
// reported as a job-checkpoint event. The gpufleet agent command is a
// few lines around Config and Run.
//
// Package agent imports its subpackages, core and clock; it must not
// import the server's packages (api, store, server) nor a decision
// package (engine, sched, fleet, billing, plan): the server is reached
// only through link.Uplink, and decisions are the server's.
package agent
