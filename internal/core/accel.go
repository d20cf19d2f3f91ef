package core

import (
	"fmt"
	"slices"
	"strings"
)

// Accelerator is the maker and family of a machine's accelerators: what
// software stack a job must be built for to run on them (CUDA, ROCm,
// Neuron, SynapseAI, ...). A job runs only where it was built to run.
type Accelerator string

// The accelerator families. The empty Accelerator is NVIDIA: catalogs and
// jobs that never name one mean NVIDIA GPUs.
const (
	NVIDIA        Accelerator = "nvidia"
	AMD           Accelerator = "amd"
	AWSInferentia Accelerator = "aws-inferentia"
	AWSTrainium   Accelerator = "aws-trainium"
	IntelGaudi    Accelerator = "intel-gaudi"
	QualcommAI100 Accelerator = "qualcomm-ai100"
	GoogleTPU     Accelerator = "google-tpu"
)

const accelAllowedIs = "one of nvidia, amd, aws-inferentia, aws-trainium, intel-gaudi, qualcomm-ai100, google-tpu"

// Accelerators lists every accelerator family.
var Accelerators = []Accelerator{NVIDIA, AMD, AWSInferentia, AWSTrainium, IntelGaudi, QualcommAI100, GoogleTPU}

// ParseAccelerator validates an accelerator family name; field names the
// input it came from, for the error.
func ParseAccelerator(field, s string) (Accelerator, error) {
	if a := Accelerator(s); slices.Contains(Accelerators, a) {
		return a, nil
	}
	return "", &FieldError{Field: field, Value: s, Allowed: accelAllowedIs}
}

// Or returns a, or NVIDIA when a is empty.
func (a Accelerator) Or() Accelerator {
	if a == "" {
		return NVIDIA
	}
	return a
}

// Workload is what a job does with its accelerators. Training needs what
// inference does and more (backward passes, optimizer state, the
// training half of a software stack), so hardware that trains also
// serves, and inference-only hardware never trains.
type Workload string

// The workloads. The empty Workload is Training: the default that never
// puts a job on hardware that cannot run it.
const (
	Training  Workload = "training"
	Inference Workload = "inference"
)

// ParseWorkload validates a workload name; field names the input.
func ParseWorkload(field, s string) (Workload, error) {
	switch Workload(s) {
	case Training, Inference:
		return Workload(s), nil
	}
	return "", &FieldError{Field: field, Value: s, Allowed: "one of training, inference"}
}

// Or returns w, or Training when w is empty.
func (w Workload) Or() Workload {
	if w == "" {
		return Training
	}
	return w
}

// Capability is the most demanding workload a machine's accelerators run:
// Training machines run training and inference, Inference machines only
// inference. The empty Capability is Training.
type Capability = Workload

// Runs reports whether hardware of capability c runs workload w.
func Runs(c Capability, w Workload) bool {
	return c.Or() == Training || w.Or() == Inference
}

// Hardware is what of a machine decides whether a job may ever run on
// it, whatever is free on it now: its accelerators' family and
// capability, its GPU model and the GPU memory a job can have on one GPU.
type Hardware struct {
	Accelerator Accelerator
	Capability  Capability
	GPUModel    string
	// MemPerGPUMiB is the GPU memory one GPU of the machine gives a job
	// (for a GPU slice, the slice's); 0 when not known (anything fits).
	MemPerGPUMiB int64
	// SliceMilli is the share of its one GPU a slice has; 0 for whole
	// GPUs. Only work that asks for at most that share fits a slice.
	SliceMilli Milli
}

// Admits is gpufleet's one rule for where a job may run: on accelerators
// of a family the job lists (NVIDIA when it lists none), that can do its
// workload (training when it says none), of a GPU model it allows (any
// when it lists none), with the GPU memory it needs per GPU and, on a
// GPU slice, no more than the slice's share. The
// scheduler (existing nodes), the fleet (offers to rent) and the bounds
// all ask it, so what is rented for a job is what it can be placed on.
func (r *Request) Admits(h Hardware) bool {
	a := h.Accelerator.Or()
	if len(r.Accelerators) == 0 {
		if a != NVIDIA {
			return false
		}
	} else if !slices.Contains(r.Accelerators, a) {
		return false
	}
	if !Runs(h.Capability, r.Workload) {
		return false
	}
	if len(r.Models) > 0 && !slices.Contains(r.Models, h.GPUModel) {
		return false
	}
	if h.SliceMilli > 0 && r.MilliPerGPU > h.SliceMilli {
		return false
	}
	return h.MemPerGPUMiB == 0 || r.MemPerGPUMiB <= h.MemPerGPUMiB
}

// validateAccel checks a request's workload and accelerator list.
func (r *Request) validateAccel() error {
	if r.Workload != "" {
		if _, err := ParseWorkload("workload", string(r.Workload)); err != nil {
			return err
		}
	}
	for i, a := range r.Accelerators {
		if _, err := ParseAccelerator(fmt.Sprintf("accelerators[%d]", i), string(a)); err != nil {
			return err
		}
		if slices.Contains(r.Accelerators[:i], a) {
			return &FieldError{Field: fmt.Sprintf("accelerators[%d]", i), Value: string(a), Allowed: "each family once"}
		}
	}
	return nil
}

// FormatAccelerators writes a job's accelerator list as the text the CLI
// and the job file take: "nvidia" when it lists none.
func FormatAccelerators(as []Accelerator) string {
	if len(as) == 0 {
		return string(NVIDIA)
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	return strings.Join(s, ",")
}
