// Package runner runs the jobs the server places on this machine, each as
// a process group of its own: with CUDA_VISIBLE_DEVICES naming its GPUs,
// MPS limits on shared GPUs, a checkpoint directory that survives the job
// (GPUFLEET_CHECKPOINT_DIR) so a restarted job resumes, its output kept in
// a local log file and streamed to a sink line by line, and a stop that
// asks before it forces: the checkpoint signal (SIGUSR1 by default), a
// grace period, SIGTERM, a shorter grace, SIGKILL — each to the whole
// group, so a job's children never outlive it.
//
// Time comes from an injected clock.Clock: a test on a manual clock
// decides when a grace period is over. Process control is Linux's
// (process groups, waitid); other systems get a runner that refuses to
// start jobs.
//
// Package runner must not import the agent's link or spool (it reports
// through its sinks) nor any decision package.
package runner
