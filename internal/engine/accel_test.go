package engine

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/pricing"
)

// awsCSV is the real AWS price list; tests run in the package directory
// and shared/ sits beside the repository.
const awsCSV = "../../../shared/data/aws-gpu-pricing-vantage/aws_gpu_prices_linux.csv"

// awsRegion is the real AWS price list's offers in one region.
func awsRegion(t *testing.T, region string) []core.Offer {
	t.Helper()
	f, err := os.Open(awsCSV)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := pricing.ImportAWS(awsCSV, f)
	if err != nil {
		t.Fatal(err)
	}
	var out []core.Offer
	for _, o := range c.Offers {
		if o.Region == region {
			out = append(out, o)
		}
	}
	return out
}

// watch records, per unit, the offers of the leases it was placed on and
// of the machines rented for it, at every step.
type watch struct {
	placedOn map[string][]*core.Offer
	rentFor  map[string][]*core.Offer
}

func (w *watch) onStep(h *harness, d *Decisions) {
	leases := h.st.leaseIndex()
	for _, p := range d.Place {
		for _, part := range p.Parts {
			w.placedOn[p.Unit] = append(w.placedOn[p.Unit], leases[part.LeaseID].Offer)
		}
	}
	for _, a := range d.Acquire {
		for _, u := range a.For {
			w.rentFor[u] = append(w.rentFor[u], a.Offer)
		}
	}
}

func ids(os []*core.Offer) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.InstanceType)
	}
	return out
}

// TestAWSTrainingNeverOnInferenceHardware runs the real us-east-1 price
// list through the engine. Its cheapest machine per accelerator-hour is
// inf1.xlarge (one Inferentia, 0.228 USD/h), an inference-only chip: an
// inference job built for Inferentia rents it, and a training job that
// arrives while that machine sits idle and paid for is neither placed on
// it nor rents another inf1 (or any inference-only machine) — it rents an
// NVIDIA GPU that trains.
func TestAWSTrainingNeverOnInferenceHardware(t *testing.T) {
	offers := awsRegion(t, "us-east-1")
	h := newHarness(t, offers, Config{})
	w := &watch{placedOn: map[string][]*core.Offer{}, rentFor: map[string][]*core.Offer{}}
	h.onStep = w.onStep
	serve := job("serve", core.TierCore, 1, 20*time.Minute)
	serve.Request.Workload, serve.Request.Accelerators = core.Inference, []core.Accelerator{core.AWSInferentia}
	train := job("train", core.TierCore, 1, 30*time.Minute)
	var trainAt time.Time
	h.onTick = func(h *harness) {
		if h.now.Equal(t0) {
			h.submit(serve, 20*time.Minute)
		}
		// As soon as serve is done, while its inf1 is idle and paid for.
		if trainAt.IsZero() && h.st.Units[0].State == core.JobSucceeded {
			trainAt = h.now
			h.submit(train, 30*time.Minute)
		}
	}
	h.runUntil(t0.Add(2 * time.Hour))
	for _, u := range h.st.Units {
		if u.State != core.JobSucceeded {
			t.Errorf("unit %s ended %s", u.Key(), u.State)
		}
	}
	if got := ids(w.rentFor["serve"]); !slices.Equal(got, []string{"inf1.xlarge"}) {
		t.Errorf("rented for the Inferentia inference job: %v, want [inf1.xlarge] (the cheapest)", got)
	}
	// The inf1 was idle and ready when train arrived and at the step
	// after: the test means something only if it was there to take.
	idleInf1 := false
	for _, l := range h.st.Leases {
		if l.Offer.InstanceType == "inf1.xlarge" && (l.End.IsZero() || l.End.After(trainAt)) {
			idleInf1 = true
		}
	}
	if !idleInf1 {
		t.Errorf("the inf1.xlarge was gone before the training job arrived")
	}
	if len(w.placedOn["train"]) == 0 || len(w.rentFor["train"]) == 0 {
		t.Fatalf("training job placed on %v, rented %v; want it placed on a machine rented for it", ids(w.placedOn["train"]), ids(w.rentFor["train"]))
	}
	for _, o := range append(w.placedOn["train"], w.rentFor["train"]...) {
		if o.Accelerator.Or() != core.NVIDIA || o.Capability.Or() != core.Training {
			t.Errorf("training job placed on or rented %s (%s, %s): want only NVIDIA machines that train", o.InstanceType, o.Accelerator.Or(), o.Capability.Or())
		}
	}
	t.Logf("serve rented %v; train rented %v, placed on %v", ids(w.rentFor["serve"]), ids(w.rentFor["train"]), ids(w.placedOn["train"]))
}

// TestAWSGPUSlices schedules inference work onto the price list's L4
// slices: g6f.large is 125 milli-GPUs of an L4 with 3 GiB, so two
// eighth-GPU jobs need two of them, a quarter-GPU job does not fit one,
// and paid GPU-hours count each at 0.125.
func TestAWSGPUSlices(t *testing.T) {
	offers := awsRegion(t, "us-east-1")
	h := newHarness(t, offers, Config{})
	w := &watch{placedOn: map[string][]*core.Offer{}, rentFor: map[string][]*core.Offer{}}
	h.onStep = w.onStep
	slice := func(id string, milli core.Milli) *core.Job {
		j := job(id, core.TierCore, 1, 50*time.Minute)
		j.Request.Workload, j.Request.MilliPerGPU = core.Inference, milli
		return j
	}
	h.onTick = func(h *harness) {
		switch h.now.Sub(t0) {
		case 0:
			h.submit(slice("a", 125), 50*time.Minute)
			h.submit(slice("b", 125), 50*time.Minute)
		case 10 * time.Minute: // a and b fill their slices
			h.submit(slice("q", 250), 50*time.Minute)
		}
	}
	end := t0.Add(2 * time.Hour)
	h.runUntil(end)
	for _, u := range h.st.Units {
		if u.State != core.JobSucceeded {
			t.Errorf("unit %s ended %s", u.Key(), u.State)
		}
	}
	for _, u := range []string{"a", "b"} {
		if got := ids(w.placedOn[u]); !slices.Equal(got, []string{"g6f.large"}) {
			t.Errorf("%s placed on %v, want one g6f.large (the cheapest per useful GPU-hour)", u, got)
		}
	}
	if got := ids(w.placedOn["q"]); len(got) != 1 || got[0] == "g6f.large" || got[0] == "g6f.xlarge" {
		t.Errorf("quarter-GPU job placed on %v, want one machine with at least 250 milli-GPUs", got)
	}
	var eighths, paid int64
	for _, l := range h.st.Leases {
		if l.Offer.InstanceType == "g6f.large" {
			eighths++
			if l.Offer.CapMilli() != 125 {
				t.Errorf("g6f.large pays %d milli-GPUs per hour, want 125", l.Offer.CapMilli())
			}
		}
	}
	if eighths != 2 {
		t.Errorf("%d g6f.large rented, want 2: one eighth-GPU slice holds one eighth-GPU job", eighths)
	}
	_, paid = h.bill(end)
	t.Logf("leases: %d g6f.large; paid %d milli-GPU-hours", eighths, paid)
}
