package kubenodes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Exec is a Machines that runs your commands: Start to start a machine
// whose kubelet joins the cluster as the node (a cloud CLI, an IDC's
// API, a Cluster API MachineDeployment scaled up), Stop to end it. Each
// runs with the node's description in its environment:
//
//	GPUFLEET_NODE_NAME     the node name: the kubelet's --hostname-override
//	GPUFLEET_NODE_LABELS   k=v,k=v…: the kubelet's --node-labels (the pool's labels)
//	GPUFLEET_LEASE         the lease id (client token)
//	GPUFLEET_OFFER         the catalog offer id
//	GPUFLEET_INSTANCE_TYPE the offer's instance type
//	GPUFLEET_REGION        the offer's region
//	GPUFLEET_GPUS          the offer's GPUs per machine
//	GPUFLEET_MODE          the billing mode
//
// Both must be idempotent by GPUFLEET_NODE_NAME (tag the machine with
// it): gpufleet calls them again after a crash or a timeout. A non-zero
// exit is an error whose text ends with the command's stderr.
type Exec struct {
	StartCmd, StopCmd []string
	// Timeout bounds each command (default 10 min).
	Timeout time.Duration
}

var _ Machines = (*Exec)(nil)

// NewExec makes an Exec from the two command lines (argv).
func NewExec(start, stop []string) (*Exec, error) {
	if len(start) == 0 {
		return nil, &core.FieldError{Field: "machines start command", Value: "", Allowed: "a command line (argv) that starts a machine joining as $GPUFLEET_NODE_NAME"}
	}
	if len(stop) == 0 {
		return nil, &core.FieldError{Field: "machines stop command", Value: "", Allowed: "a command line (argv) that ends the machine $GPUFLEET_NODE_NAME"}
	}
	return &Exec{StartCmd: start, StopCmd: stop}, nil
}

// Start implements Machines.
func (e *Exec) Start(ctx context.Context, n *corev1.Node, o *core.Offer) error {
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = k + "=" + n.Labels[k]
	}
	return e.run(ctx, e.StartCmd, []string{
		"GPUFLEET_NODE_NAME=" + n.Name,
		"GPUFLEET_NODE_LABELS=" + strings.Join(kv, ","),
		"GPUFLEET_LEASE=" + n.Labels[LabelLease],
		"GPUFLEET_OFFER=" + o.ID,
		"GPUFLEET_INSTANCE_TYPE=" + o.InstanceType,
		"GPUFLEET_REGION=" + o.Region,
		"GPUFLEET_GPUS=" + strconv.Itoa(o.GPUs),
		"GPUFLEET_MODE=" + n.Labels[LabelMode],
	})
}

// Stop implements Machines.
func (e *Exec) Stop(ctx context.Context, name string) error {
	return e.run(ctx, e.StopCmd, []string{"GPUFLEET_NODE_NAME=" + name})
}

func (e *Exec) run(ctx context.Context, argv, env []string) error {
	d := e.Timeout
	if d <= 0 {
		d = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return fmt.Errorf("%s: %w: %s", argv[0], err, msg)
	}
	return nil
}
