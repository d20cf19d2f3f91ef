// Package runner runs the jobs the server places on this machine, each as
// a process group of its own: with CUDA_VISIBLE_DEVICES naming its GPUs,
// MPS limits on shared GPUs, a checkpoint directory that survives the job
// (GPUFLEET_CHECKPOINT_DIR) so a restarted job resumes, its output kept in
// a local log file and streamed to a sink line by line, and a stop that
// asks before it forces: the checkpoint signal (SIGUSR1 by default), a
// grace period, SIGTERM, a shorter grace, SIGKILL — each to the whole
// group, so a job's children never outlive it. The checkpoint signal
// reaching every process of the group is deliberate (a launcher and its
// workers all hear it) and has a cost: SIGUSR1's default action is to
// terminate, so a child that neither handles nor ignores it ends at once.
// A job that cannot arrange that picks another signal (Spec's
// CheckpointSignal).
//
// A job is over when its leader exits: what is left of its group is
// killed then, and its resource use is the leader's and that of the
// children the leader waited for.
//
// Time comes from an injected clock.Clock: a test on a manual clock
// decides when a grace period is over. Process control is Linux's
// (process groups, waitid); other systems get a runner that refuses to
// start jobs.
//
// Package runner must not import the agent's link or spool (it reports
// through its sinks) nor any decision package.
package runner
