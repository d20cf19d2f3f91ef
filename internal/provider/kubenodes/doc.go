// Package kubenodes is a node-pool provider: the machines it rents are
// Kubernetes nodes. Acquire makes a Node named from the lease id (the
// client token) and carrying the labels gpufleet and GPU feature
// discovery put on GPU nodes, then asks a Machines hook to start the
// machine behind it; Release cordons the node, evicts its pods through
// the Eviction API (a PodDisruptionBudget's 429 is retried), deletes the
// Node and stops the machine. The Node object is the lease's only
// record: List finds the pool's nodes by label, so a restarted server
// loses nothing, and a node without the pool's labels is never touched.
//
// KWOK is the Machines of tests: the Node it is given is all there is
// (KWOK makes it Ready and runs its pods). In production a Machines
// starts a machine whose kubelet registers under the node's name and
// adopts the Node gpufleet made (docs/kubernetes.md, "Node pools").
//
// It imports core, provider, clock and client-go; nothing of the
// engine's, and no store: the cluster is the state.
package kubenodes
