package fleet

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// feasibleOffers: A100 machines of 8 × 40 GiB (on-demand and spot), and
// spot-only H100 machines of 4 × 80 GiB.
func feasibleOffers() []core.Offer {
	hour := int64(3600)
	od := core.PricePlan{Mode: core.OnDemand, Price: 4_000_000, Per: core.Hour, Granularity: hour}
	spot := core.PricePlan{Mode: core.Spot, Price: 1_500_000, Per: core.Hour, Granularity: 1, Reclaim: &core.ReclaimModel{Bucket: ">20%", MonthlyRateBP: 2500, NoticeSeconds: 120}}
	return []core.Offer{
		{ID: "a100x8", GPUModel: "A100", GPUs: 8, GPUMemMiB: 40 << 10, Plans: []core.PricePlan{od, spot}},
		{ID: "h100x4-spot", GPUModel: "H100", GPUs: 4, GPUMemMiB: 80 << 10, Plans: []core.PricePlan{spot}},
	}
}

// inferenceOffers is a catalog of Inferentia machines only.
func inferenceOffers() []core.Offer {
	od := core.PricePlan{Mode: core.OnDemand, Price: 300_000, Per: core.Hour, Granularity: 1}
	return []core.Offer{{ID: "inf1", GPUModel: "Inferentia", GPUs: 1, GPUMemMiB: 8 << 10,
		Accelerator: core.AWSInferentia, Capability: core.Inference, Plans: []core.PricePlan{od}}}
}

// sliceOffers is a catalog of eighth-of-an-L4 machines only.
func sliceOffers() []core.Offer {
	od := core.PricePlan{Mode: core.OnDemand, Price: 200_000, Per: core.Hour, Granularity: 1}
	return []core.Offer{{ID: "g6f", GPUModel: "L4", GPUs: 1, SliceMilli: 125, GPUMemMiB: 24 << 10,
		Capability: core.Inference, Plans: []core.PricePlan{od}}}
}

func TestFeasible(t *testing.T) {
	sixteen := func(string) int { return 16 }
	for _, tc := range []struct {
		name     string
		edit     func(j *core.Job)
		capacity Capacity
		field    string // "" for feasible
		allowed  string
		offers   []core.Offer // nil: feasibleOffers
	}{
		{"one GPU", func(*core.Job) {}, nil, "", "", nil},
		{"unknown model", func(j *core.Job) { j.Request.Models = []string{"Z100"} }, nil, "models", "A100, H100", nil},
		{"throughput for unknown models", func(j *core.Job) { j.Request.Throughput = map[string]int64{"Z100": 5} }, nil, "throughput", "A100, H100", nil},
		{"more memory than any GPU", func(j *core.Job) { j.Request.MemPerGPUMiB = 900_000 }, nil, "gpu_mem_mib", "at most 81920 MiB", nil},
		{"more memory than the allowed model", func(j *core.Job) { j.Request.Models, j.Request.MemPerGPUMiB = []string{"A100"}, 50_000 }, nil, "gpu_mem_mib", "at most 40960 MiB", nil},
		{"spot only, not interruptible", func(j *core.Job) { j.Request.Models = []string{"H100"} }, nil, "interruptible", "spot only", nil},
		{"spot only, interruptible", func(j *core.Job) { j.Request.Models, j.Interruptible = []string{"H100"}, true }, nil, "", "", nil},
		{"gang spans machines, no limit", func(j *core.Job) { j.Request.GPUs = 1000 }, nil, "", "", nil},
		{"gang over the provider's capacity", func(j *core.Job) { j.Request.GPUs = 1000 }, sixteen, "gpus", "at most 128", nil},
		{"gang within the capacity", func(j *core.Job) { j.Request.GPUs = 128 }, sixteen, "", "", nil},
		{"training, Inferentia only", func(j *core.Job) { j.Request.Accelerators = []core.Accelerator{core.AWSInferentia} }, nil, "workload", "inference only", inferenceOffers()},
		{"NVIDIA by default, Inferentia only", func(j *core.Job) { j.Request.Workload = core.Inference }, nil, "accelerators", "aws-inferentia", inferenceOffers()},
		{"inference on Inferentia", func(j *core.Job) {
			j.Request.Workload, j.Request.Accelerators = core.Inference, []core.Accelerator{core.AWSInferentia}
		}, nil, "", "", inferenceOffers()},
		{"a whole GPU, slices only", func(j *core.Job) { j.Request.Workload = core.Inference }, nil, "gpu_milli", "125", sliceOffers()},
		{"an eighth, slices only", func(j *core.Job) { j.Request.Workload, j.Request.MilliPerGPU = core.Inference, 125 }, nil, "", "", sliceOffers()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &core.Job{ID: "j", Team: "t", Tier: core.TierRegular, Request: core.Request{GPUs: 1, MilliPerGPU: core.WholeGPU}}
			tc.edit(j)
			offers := tc.offers
			if offers == nil {
				offers = feasibleOffers()
			}
			err := Feasible(j, offers, tc.capacity)
			var fe *core.FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Allowed, tc.allowed)):
				t.Errorf("got %v, want a FieldError for %s allowing %q", err, tc.field, tc.allowed)
			}
		})
	}
}

// TestFeasibleAgreesWithAcquire: with no capacity limit, Acquire rents
// for a job exactly when Feasible accepts it — one rule, not two.
func TestFeasibleAgreesWithAcquire(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	models := []string{"A100", "H100", "Z100"}
	for i := range 2000 {
		j := &core.Job{ID: "j", Team: "t", Tier: core.TierRegular, EstDuration: time.Hour, Interruptible: rng.IntN(2) == 0,
			Request: core.Request{GPUs: 1 + rng.IntN(40), MilliPerGPU: core.WholeGPU, MemPerGPUMiB: int64(rng.IntN(100_000))}}
		for _, m := range models {
			if rng.IntN(3) == 0 {
				j.Request.Models = append(j.Request.Models, m)
			}
		}
		d := Demand{Unit: demandFor("j", core.TierRegular, time.Hour, false).Unit, Since: now.Add(-2 * time.Hour)}
		d.Unit.Job = j
		rented := len(Acquire(now, []Demand{d}, nil, feasibleOffers(), nil, 0, nil, nil, Config{})) > 0
		if err := Feasible(j, feasibleOffers(), nil); (err == nil) != rented {
			t.Fatalf("case %d: job %+v: Feasible %v, Acquire rented %v", i, j.Request, err, rented)
		}
	}
}
