// Package gpuutil reads GPU utilization series — per job or per pod, one
// reading per line: id,time,utilization — and answers what the readings
// say about an interval: the utilization-weighted (busy) time of a job's
// GPUs, and the reading in force at an instant. The simulator takes busy
// GPU-hours and the idle ladder's readings from it (gpufleet sim --util),
// the audit its utilization evidence (gpufleet report audit --util).
//
// It imports core only, does no I/O of its own (files come in as an
// io.Reader) and never reads the clock.
package gpuutil
