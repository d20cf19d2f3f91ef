package core

import (
	"errors"
	"testing"
)

// TestAdmits is the feasibility rule's table: family, workload, model and
// memory, with the empty values' meanings (NVIDIA, training, any model).
func TestAdmits(t *testing.T) {
	h100 := Hardware{GPUModel: "H100", MemPerGPUMiB: 80 << 10}
	inf1 := Hardware{Accelerator: AWSInferentia, Capability: Inference, GPUModel: "AWS Inferentia", MemPerGPUMiB: 8 << 10}
	trn1 := Hardware{Accelerator: AWSTrainium, GPUModel: "AWS Trainium", MemPerGPUMiB: 32 << 10}
	l4Slice := Hardware{Accelerator: NVIDIA, Capability: Inference, GPUModel: "NVIDIA L4", MemPerGPUMiB: 3 << 10, SliceMilli: 125}
	tests := []struct {
		name string
		r    Request
		h    Hardware
		want bool
	}{
		{"default job on an NVIDIA GPU", Request{}, h100, true},
		{"default job on Inferentia", Request{}, inf1, false},
		{"training job that allows Inferentia", Request{Accelerators: []Accelerator{NVIDIA, AWSInferentia}}, inf1, false},
		{"inference job that allows Inferentia", Request{Workload: Inference, Accelerators: []Accelerator{AWSInferentia}}, inf1, true},
		{"inference job, NVIDIA only, on Inferentia", Request{Workload: Inference}, inf1, false},
		{"inference job on a training GPU", Request{Workload: Inference}, h100, true},
		{"training job on an L4 slice", Request{}, l4Slice, false},
		{"inference job on an L4 slice", Request{Workload: Inference, MilliPerGPU: 125}, l4Slice, true},
		{"inference job wanting more than the slice", Request{Workload: Inference, MilliPerGPU: 250}, l4Slice, false},
		{"inference job too big for the slice", Request{Workload: Inference, MemPerGPUMiB: 4 << 10}, l4Slice, false},
		{"training job that lists Trainium only", Request{Accelerators: []Accelerator{AWSTrainium}}, trn1, true},
		{"job that lists Trainium only, on NVIDIA", Request{Accelerators: []Accelerator{AWSTrainium}}, h100, false},
		{"model not allowed", Request{Models: []string{"A100"}}, h100, false},
		{"model allowed", Request{Models: []string{"A100", "H100"}}, h100, true},
		{"memory unknown", Request{MemPerGPUMiB: 1 << 20}, Hardware{GPUModel: "X"}, true},
		{"memory short", Request{MemPerGPUMiB: 81 << 10}, h100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Admits(tt.h); got != tt.want {
				t.Errorf("Admits(%+v) = %v, want %v", tt.h, got, tt.want)
			}
		})
	}
}

func TestOfferSlice(t *testing.T) {
	q := Offer{GPUs: 1, SliceMilli: 250, GPUMemMiB: 24 << 10, GPUModel: "NVIDIA L4"}
	if q.CapMilli() != 250 || q.MilliPerGPU() != 250 || q.MemPerGPUMiB() != 6<<10 || q.Hardware().MemPerGPUMiB != 6<<10 {
		t.Errorf("quarter L4: cap %d, per GPU %d, %d MiB", q.CapMilli(), q.MilliPerGPU(), q.MemPerGPUMiB())
	}
	w := Offer{GPUs: 8, GPUMemMiB: 80 << 10}
	if w.CapMilli() != 8000 || w.MilliPerGPU() != WholeGPU || w.MemPerGPUMiB() != 80<<10 {
		t.Errorf("8 whole GPUs: cap %d, per GPU %d, %d MiB", w.CapMilli(), w.MilliPerGPU(), w.MemPerGPUMiB())
	}
	n := Node{GPUMemMiB: 24 << 10, SliceMilli: 125, GPUs: make([]GPU, 1)}
	if n.CapMilli() != 125 || n.Hardware().MemPerGPUMiB != 3<<10 {
		t.Errorf("eighth-L4 node: cap %d, %d MiB", n.CapMilli(), n.Hardware().MemPerGPUMiB)
	}
}

func TestJobValidateAccelerators(t *testing.T) {
	base := func() Job {
		return Job{ID: "j", Tier: TierCore, Request: Request{GPUs: 1, MilliPerGPU: WholeGPU}}
	}
	tests := []struct {
		name  string
		edit  func(*Request)
		field string
	}{
		{"ok defaults", func(*Request) {}, ""},
		{"ok inference on inferentia", func(r *Request) { r.Workload, r.Accelerators = Inference, []Accelerator{AWSInferentia} }, ""},
		{"bad workload", func(r *Request) { r.Workload = "serving" }, "workload"},
		{"bad accelerator", func(r *Request) { r.Accelerators = []Accelerator{NVIDIA, "cuda"} }, "accelerators[1]"},
		{"repeated accelerator", func(r *Request) { r.Accelerators = []Accelerator{AMD, AMD} }, "accelerators[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := base()
			tt.edit(&j.Request)
			err := j.Validate()
			var fe *FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Fatalf("Validate: %v, want an error on %s", err, tt.field)
			}
		})
	}
}
