package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider/kubenodes"
)

// nodePoolFlags are serve --kubernetes --node-pool's flags: the pool
// rents nodes for waiting pods and releases idle ones at their billing
// boundary (docs/kubernetes.md, "Node pools").
type nodePoolFlags struct {
	name, start, stop string
	offers            []string
	drainTimeout      time.Duration
	force             bool
}

func (f *nodePoolFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "node-pool", "", "with --kubernetes: rent GPU nodes for waiting pods and release idle ones at their billing boundary (cordon, drain, delete), as the pool NAME: its nodes are NAME-l<n>, labelled gpufleet.io/pool=NAME (docs/kubernetes.md, Node pools)")
	fl.StringSliceVar(&f.offers, "node-pool-offer", nil, "with --node-pool: a catalog offer the pool may rent (repeatable; default every offer of whole GPUs the policy allows)")
	fl.StringVar(&f.start, "node-pool-start", "", "with --node-pool: a shell command that starts the machine of a new node, its kubelet joining as $GPUFLEET_NODE_NAME with --node-labels $GPUFLEET_NODE_LABELS (default none: the Node alone, for KWOK)")
	fl.StringVar(&f.stop, "node-pool-stop", "", "with --node-pool: a shell command that ends the machine of node $GPUFLEET_NODE_NAME")
	fl.DurationVar(&f.drainTimeout, "node-pool-drain-timeout", kubenodes.DefaultDrainTimeout, "with --node-pool: how long a release waits for evictions a PodDisruptionBudget refuses; then the node is uncordoned and kept (or, with --node-pool-force, its pods deleted)")
	fl.BoolVar(&f.force, "node-pool-force", false, "with --node-pool: past the drain timeout, delete the pods left and the node instead of keeping it")
}

// flags are the pool's flags, all of which need --kubernetes.
func (f *nodePoolFlags) flags() []string {
	return []string{"node-pool", "node-pool-offer", "node-pool-start", "node-pool-stop", "node-pool-drain-timeout", "node-pool-force"}
}

// check refuses the pool's flags without --node-pool, and flags that do
// not go together.
func (f *nodePoolFlags) check(cmd *cobra.Command) error {
	if f.name == "" {
		for _, name := range f.flags()[1:] {
			if cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s needs --node-pool", name)}
			}
		}
		return nil
	}
	if (f.start == "") != (f.stop == "") {
		return usageError{errors.New("--node-pool-start and --node-pool-stop go together: a pool that starts machines must stop them")}
	}
	if f.drainTimeout <= 0 {
		return usageError{&core.FieldError{Field: "--node-pool-drain-timeout", Value: f.drainTimeout.String(), Allowed: "a duration > 0"}}
	}
	return nil
}

// build makes the pool (nil without --node-pool) of the offers the
// policy allows, or of those --node-pool-offer names.
func (f *nodePoolFlags) build(client kubernetes.Interface, allowed []core.Offer, log *slog.Logger) (*kubenodes.Pool, error) {
	if f.name == "" {
		return nil, nil
	}
	var offers []core.Offer
	if len(f.offers) == 0 {
		for _, o := range allowed {
			if o.GPUs >= 1 && o.SliceMilli == 0 {
				offers = append(offers, o)
			}
		}
	}
	for _, id := range f.offers {
		i := slices.IndexFunc(allowed, func(o core.Offer) bool { return o.ID == id })
		if i < 0 {
			return nil, usageError{&core.FieldError{Field: "--node-pool-offer", Value: id, Allowed: "an offer of the catalog that the policy allows"}}
		}
		offers = append(offers, allowed[i])
	}
	if len(offers) == 0 {
		return nil, usageError{errors.New("--node-pool: the catalog has no offer of whole GPUs that the policy allows: nothing to rent")}
	}
	var machines kubenodes.Machines = kubenodes.KWOK{}
	how := "none: the Node alone (KWOK)"
	if f.start != "" {
		e, err := kubenodes.NewExec([]string{"sh", "-c", f.start}, []string{"sh", "-c", f.stop})
		if err != nil {
			return nil, usageError{err}
		}
		machines, how = e, "--node-pool-start and --node-pool-stop"
	}
	p, err := kubenodes.New(kubenodes.Config{Client: client, Pool: f.name, Offers: offers, Machines: machines,
		DrainTimeout: f.drainTimeout, Force: f.force, Log: log})
	if err != nil {
		return nil, usageError{fmt.Errorf("--node-pool: %w", err)}
	}
	log.Info("node pool: the engine rents and releases nodes", "pool", p.Name(), "offers", len(offers), "machines", how,
		"drain_timeout", f.drainTimeout, "force", f.force)
	return p, nil
}
