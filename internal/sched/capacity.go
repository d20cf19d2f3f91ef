package sched

import (
	"github.com/gpufleet/gpufleet/internal/capacity"
	"github.com/gpufleet/gpufleet/internal/core"
)

// gpuFits reports whether GPU g of n can take one GPU of r (see
// capacity.GPUFits).
func gpuFits(n *core.Node, g int, r *core.Request) bool { return capacity.GPUFits(n, g, r) }

// hostFits reports whether n's host has CPU and memory for k GPUs' worth
// of r. A node that does not track host resources always fits.
func hostFits(n *core.Node, r *core.Request, k int) bool {
	cpu, mem := capacity.HostShare(r, k)
	return capacity.HostFits(n, cpu, mem)
}

// apply takes part p of unit u from the nodes' free capacity (sign 1) or
// gives it back (sign -1), through the capacity module. The scheduler only
// applies what it found to fit, so a refusal means its accounting is
// broken: it panics rather than decide on a wrong view.
func apply(nodes []core.Node, u *Unit, p Part, sign int64) {
	n := &nodes[p.Node]
	var err error
	if sign > 0 {
		err = capacity.Take(n, &u.Job.Request, p.GPUs)
	} else {
		err = capacity.Give(n, &u.Job.Request, p.GPUs)
	}
	if err != nil {
		panic("sched: GPU capacity accounting broken on " + n.LeaseID + ": " + err.Error())
	}
}

// freeWhole counts n's empty GPUs.
func freeWhole(n *core.Node) int { return capacity.FreeWhole(n) }
