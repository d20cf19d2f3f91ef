// Package kube runs gpufleet as a secondary scheduler on a Kubernetes
// cluster: the GPU nodes are the capacity, the pods that name gpufleet
// in spec.schedulerName are the work, and engine.Step decides.
//
// It is translation and nothing more. translate.go turns a snapshot of
// nodes and pods (from client-go shared informers) into an engine.State
// — a ready lease per schedulable GPU node, a unit per pod or per gang
// of pods — and the engine's Decisions back into Actions: bindings
// (the pods/binding subresource, as kube-scheduler's DefaultBinder
// does), evictions (policy/v1 Eviction, so the kubelet sends SIGTERM and
// waits the pod's terminationGracePeriodSeconds: the checkpoint signal),
// and the reason each waiting pod waits (a PodScheduled=False condition
// and an Event). Scheduler (scheduler.go) is the thin loop around it:
// observe → Step → act, every tick. No placement rule lives here: which
// pod goes where, who is preempted and why a pod waits are the engine's.
//
// What it touches: only pods whose schedulerName is gpufleet's (bind,
// evict, patch their status, recreate a bare pod it evicted, annotate
// one that shares a GPU with its reservation, device and memory limit),
// Events about them, and its own reservation pods (share.go: made
// bound to a node with nvidia.com/gpu: 1 for a GPU that pods share,
// deleted when none does). Other pods are read only, to count the GPUs they hold.
// Nodes are read only, except with a node pool (nodepool.go,
// provider/kubenodes): then the nodes it created, and only those (by
// their gpufleet.io/pool label), are made, cordoned, drained and
// deleted as the engine rents and releases them.
//
// It imports the engine and the domain, client-go for I/O, and no
// store: the cluster is the state (see docs/kubernetes.md).
package kube
