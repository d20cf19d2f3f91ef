package sim

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
)

// shippedCatalogs are the catalogs the repository ships, by name, and
// the AWS part of the price book alone (the plain AWS list, where the
// cheapest monthly GPU is a 1-GPU machine).
func shippedCatalogs(t *testing.T) map[string][]core.Offer {
	t.Helper()
	out := map[string][]core.Offer{"demo": pricing.Demo().Offers}
	for _, f := range []string{"catalog.yaml", "aws-pricebook/catalog.yaml", "aws-pricebook/catalog-monthly.yaml"} {
		c, err := pricing.Load(filepath.Join("..", "..", "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = c.Offers
		if f == "aws-pricebook/catalog.yaml" {
			var aws []core.Offer
			for _, o := range c.Offers {
				if o.Provider == "aws" {
					aws = append(aws, o)
				}
			}
			out["aws-pricebook/catalog.yaml, aws offers only"] = aws
		}
	}
	return out
}

// Every baseline finishes on every shipped catalog in bounded time, with
// every job done (issue 24: static-peak sized its fleet with 1-GPU
// machines on the plain AWS list and did not end in 400 s). The trace is
// short: the bursty workload and one 32-GPU gang, which a fleet of small
// machines must span.
func TestBaselinesFinishOnEveryCatalog(t *testing.T) {
	w := burstyWorkload(3)
	gang := &core.Job{ID: "gang32", Team: "team0", Tier: core.TierRegular, Submit: t0.Add(20 * time.Hour), EstDuration: 2 * time.Hour,
		Request: core.Request{GPUs: 32, MilliPerGPU: core.WholeGPU}, CheckpointInterval: 15 * time.Minute}
	w.Jobs = append(w.Jobs, gang)
	w.Actual[gang.ID] = 2 * time.Hour
	const bound = 60 * time.Second
	for name, offers := range shippedCatalogs(t) {
		for _, pn := range policy.PresetNames {
			t.Run(name+"/"+pn, func(t *testing.T) {
				p, _ := policy.Preset(pn)
				ctx, cancel := context.WithTimeout(context.Background(), bound)
				defer cancel()
				cfg := Config{Workload: w, Offers: offers, Seed: 7, Provider: provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(2 * time.Minute)}}}
				began := time.Now()
				r, err := Run(ctx, cfg, p)
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("did not finish in %s", bound)
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.Unfinished > 0 {
					t.Errorf("%d of %d jobs unfinished", r.Unfinished, r.Jobs)
				}
				t.Logf("cost %s, %d steps in %s", r.Cost, r.Steps, time.Since(began).Round(time.Millisecond))
			})
		}
	}
}

// The peak-sized base is whole machines that hold the workload's
// largest gang: on the AWS list alone, where the cheapest monthly GPU is
// a 1-GPU Graviton machine, 8-GPU machines.
func TestPeakFleetHoldsTheLargestGang(t *testing.T) {
	w := burstyWorkload(3)
	offers := shippedCatalogs(t)["aws-pricebook/catalog.yaml, aws offers only"]
	machines, ids, err := peakFleet(w, offers, core.Monthly, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		t.Fatal("no base")
	}
	for model, id := range ids {
		var o *core.Offer
		for i := range offers {
			if offers[i].ID == id {
				o = &offers[i]
			}
		}
		if o == nil || o.GPUModel != model || o.GPUs < 8 {
			t.Errorf("%s: base on %s (%v): want machines of 8 GPUs or more", model, id, o)
		}
		t.Logf("%s: %d × %s", model, machines[model], id)
	}
}
