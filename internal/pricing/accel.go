package pricing

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// awsFamily is what AWS puts in the machines of one instance family.
type awsFamily struct {
	accel core.Accelerator
	cap   core.Capability
	// model, if set, replaces the price list's gpu_model (which names trn1's
	// Trainium chips "AWS Inferentia").
	model string
}

// awsFamilies maps AWS instance families (the part of the instance type
// before the dot) to their accelerators and what they can do. The facts
// and reasons are in docs/catalog.md; a family not listed here falls back
// to its gpu_model (guessHardware). A fractional gpu_count (a GPU slice)
// is inference-only whatever its family.
var awsFamilies = map[string]awsFamily{
	// NVIDIA data-centre GPUs (CUDA): train and serve.
	"p2": {core.NVIDIA, core.Training, ""}, "p3": {core.NVIDIA, core.Training, ""}, "p3dn": {core.NVIDIA, core.Training, ""},
	"p4d": {core.NVIDIA, core.Training, ""}, "p4de": {core.NVIDIA, core.Training, ""}, "p5": {core.NVIDIA, core.Training, ""},
	"p5e": {core.NVIDIA, core.Training, ""}, "p5en": {core.NVIDIA, core.Training, ""},
	"p6-b200": {core.NVIDIA, core.Training, ""}, "p6-b300": {core.NVIDIA, core.Training, ""}, "p6e-gb200": {core.NVIDIA, core.Training, ""},
	"g4dn": {core.NVIDIA, core.Training, ""}, "g5": {core.NVIDIA, core.Training, ""}, "g5g": {core.NVIDIA, core.Training, ""},
	"g6": {core.NVIDIA, core.Training, ""}, "g6e": {core.NVIDIA, core.Training, ""}, "gr6": {core.NVIDIA, core.Training, ""},
	// Tesla M60 (compute capability 5.2): old, but current CUDA still
	// builds for it.
	"g3": {core.NVIDIA, core.Training, ""}, "g3s": {core.NVIDIA, core.Training, ""},
	// GRID K520 (compute capability 3.0, 4 GiB): no CUDA since 11.0
	// builds training stacks for it.
	"g2": {core.NVIDIA, core.Inference, ""},
	// NVIDIA L4 slices (vGPU fractions of one L4).
	"g6f": {core.NVIDIA, core.Inference, ""}, "gr6f": {core.NVIDIA, core.Inference, ""},
	// AMD Radeon Pro V520: a graphics card, sold for graphics.
	"g4ad": {core.AMD, core.Inference, ""},
	// AWS Inferentia and Inferentia2: Neuron inference chips.
	"inf1": {core.AWSInferentia, core.Inference, ""}, "inf2": {core.AWSInferentia, core.Inference, ""},
	// AWS Trainium: Neuron training chips (they serve too).
	"trn1": {core.AWSTrainium, core.Training, "AWS Trainium"}, "trn1n": {core.AWSTrainium, core.Training, "AWS Trainium"},
	"trn2": {core.AWSTrainium, core.Training, "AWS Trainium2"},
	// Intel Gaudi (DL1) trains; Qualcomm Cloud AI 100 (DL2q) serves.
	"dl1":  {core.IntelGaudi, core.Training, ""},
	"dl2q": {core.QualcommAI100, core.Inference, ""},
}

// guessHardware is the accelerator family and capability a GPU model
// name implies when a catalog does not say, and whether the name was
// recognised. Names without a known maker ("H100", "A100") are NVIDIA,
// the catalogs' convention. Inference chips are inference-only, and so is
// a GPU slice (slice > 0): a fraction of a GPU's memory and compute is
// sold for serving.
func guessHardware(model string, slice core.Milli) (core.Accelerator, core.Capability, bool) {
	m := strings.ToLower(model)
	a, c, known := core.NVIDIA, core.Training, true
	switch {
	case strings.Contains(m, "nvidia"):
	case strings.Contains(m, "inferentia"):
		a, c = core.AWSInferentia, core.Inference
	case strings.Contains(m, "trainium"):
		a = core.AWSTrainium
	case strings.Contains(m, "gaudi"):
		a = core.IntelGaudi
	case strings.Contains(m, "qualcomm"):
		a, c = core.QualcommAI100, core.Inference
	case strings.HasPrefix(m, "amd ") || strings.Contains(m, "radeon") || strings.Contains(m, "instinct"):
		a = core.AMD
	case strings.Contains(m, "tpu"):
		a = core.GoogleTPU
	default:
		known = false
	}
	if slice > 0 {
		c = core.Inference
	}
	return a, c, known
}

// withGuessedHardware fills o's accelerator and capability from its GPU
// model where the catalog left them empty.
func withGuessedHardware(o *core.Offer) {
	a, c, _ := guessHardware(o.GPUModel, o.SliceMilli)
	if o.Accelerator != "" {
		a = o.Accelerator
	}
	if o.Capability != "" {
		c = o.Capability
	}
	setHardware(o, a, c)
}

// setHardware stores a and c in o, each as the empty value when it is
// what the empty value means (NVIDIA, training), so that one machine has
// one representation whichever catalog form it came from.
func setHardware(o *core.Offer, a core.Accelerator, c core.Capability) {
	o.Accelerator, o.Capability = a, c
	if a == core.NVIDIA {
		o.Accelerator = ""
	}
	if c == core.Training {
		o.Capability = ""
	}
}

// writtenHardware is the accelerator and capability a writer must put in
// a catalog file for o to read back as o: each one only where reading
// would guess otherwise from the GPU model ("" leaves it out).
func writtenHardware(o *core.Offer) (core.Accelerator, core.Capability) {
	ga, gc, _ := guessHardware(o.GPUModel, o.SliceMilli)
	var a core.Accelerator
	var c core.Capability
	if o.Accelerator.Or() != ga {
		a = o.Accelerator.Or()
	}
	if o.Capability.Or() != gc {
		c = o.Capability.Or()
	}
	return a, c
}

const gpuCountAllowed = "a whole number of GPUs 1..1024, or a fraction of one GPU in thousandths, 0.001..0.999, such as 0.25 or 0.125"

// parseGPUCount parses a machine's GPUs: a whole number, or a fraction of
// one GPU (a slice) in whole milli-GPUs. It returns the GPUs (1 for a
// slice) and the slice's milli-GPUs (0 for whole GPUs).
func parseGPUCount(s string) (int, core.Milli, bool) {
	r, err := parseDecimal(s)
	if err != nil || r.Sign() <= 0 {
		return 0, 0, false
	}
	if r.IsInt() {
		if !r.Num().IsInt64() || r.Num().Int64() > maxGPUs {
			return 0, 0, false
		}
		return int(r.Num().Int64()), 0, true
	}
	if r.Cmp(big.NewRat(1, 1)) > 0 {
		return 0, 0, false
	}
	milli, ok := exactInt(r, int64(core.WholeGPU))
	if !ok {
		return 0, 0, false
	}
	return 1, core.Milli(milli), true
}

// FormatGPUCount writes o's GPUs per machine as the catalog forms take
// them: "8", or "0.125" for an eighth-GPU slice.
func FormatGPUCount(o *core.Offer) string {
	if o.SliceMilli > 0 {
		return formatScaled(int64(o.SliceMilli), 3)
	}
	return strconv.Itoa(o.GPUs)
}

// validateHardware checks o's accelerator, capability and slice.
func validateHardware(o *core.Offer) error {
	if o.Accelerator != "" {
		if _, err := core.ParseAccelerator("accelerator", string(o.Accelerator)); err != nil {
			return err
		}
	}
	if o.Capability != "" {
		if _, err := core.ParseWorkload("capability", string(o.Capability)); err != nil {
			return err
		}
	}
	if o.SliceMilli != 0 && (o.SliceMilli < 1 || o.SliceMilli >= core.WholeGPU || o.GPUs != 1) {
		return &core.FieldError{Field: "gpus", Value: fmt.Sprintf("%d GPUs of %d milli-GPUs", o.GPUs, o.SliceMilli), Allowed: gpuCountAllowed}
	}
	return nil
}

const (
	accelAllowed = "one of nvidia, amd, aws-inferentia, aws-trainium, intel-gaudi, qualcomm-ai100, google-tpu, or empty (guessed from gpu_model)"
	capAllowed   = "training (trains and serves) or inference (serves only), or empty (guessed from gpu_model)"
)
