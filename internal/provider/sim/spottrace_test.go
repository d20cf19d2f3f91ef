package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

func TestParseSpotTrace(t *testing.T) {
	for _, tc := range []struct {
		name, file, in string
		want           SpotTrace
	}{
		{"availability, 16-node", "availability/16-node/aws-08-27-2023/us-west-2a_v100_1.json",
			`{"metadata": {"gap_seconds": 300}, "data": [0, 5, 16]}`,
			SpotTrace{Zone: "us-west-2a", GPU: "v100", GPUs: 1, Nodes: 16, Gap: 5 * time.Minute, Counts: []int{0, 5, 16}}},
		{"preemption, 1-node, spaces", "preemption/1-node/x/us-east-1c_v100_1.json",
			" {\"data\":[1,1,0] ,\n \"metadata\":{\"gap_seconds\":32}}\n",
			SpotTrace{Zone: "us-east-1c", GPU: "v100", GPUs: 1, Nodes: 1, Gap: 32 * time.Second, Counts: []int{1, 1, 0}}},
		{"no folder, no count, extra keys", "us-central1-a_c3-88.json",
			`{"metadata": {"gap_seconds": 30, "collected_by": "probe"}, "data": [1], "prices": [0.9]}`,
			SpotTrace{Zone: "us-central1-a", GPU: "c3-88", Gap: 30 * time.Second, Counts: []int{1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSpotTrace(tc.file, strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			tc.want.File = tc.file
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("trace (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSpotTraceErrors(t *testing.T) {
	const f = "availability/1-node/x/us-east-1a_v100_1.json"
	for _, tc := range []struct {
		name, file, in, want string
	}{
		{"name", "availability/1-node/x/v100.json", `{}`, `availability/1-node/x/v100.json: unexpected file name "v100.json": want ZONE_GPU_COUNT.json, as us-west-2a_v100_1.json`},
		{"count in name", "a/us-east-1a_v100_01.json", `{}`, `a/us-east-1a_v100_01.json: unexpected GPU count in the file name "us-east-1a_v100_01.json": want ZONE_GPU_COUNT.json with COUNT 1..1024 GPUs per instance`},
		{"folder", "a/x-node/us-east-1a_v100_1.json", `{}`, `a/x-node/us-east-1a_v100_1.json: unexpected probe folder "x-node": want K-node with K 1..1000000`},
		{"not JSON", f, `[0,1]`, f + `: not a spot trace: want JSON {"metadata": {"gap_seconds": N}, "data": [counts]}`},
		{"data not a list", f, `{"metadata": {"gap_seconds": 1}, "data": 3}`, f + `: not a spot trace: want JSON`},
		{"no gap", f, `{"data": [1]}`, f + `: metadata.gap_seconds: missing: want the seconds between two data points, 1..86400`},
		{"fractional gap", f, `{"metadata": {"gap_seconds": 1.5}, "data": [1]}`, f + `: metadata.gap_seconds: invalid value "1.5": want whole seconds 1..86400`},
		{"zero gap", f, `{"metadata": {"gap_seconds": 0}, "data": [1]}`, f + `: metadata.gap_seconds: invalid value "0": want whole seconds 1..86400`},
		{"no data", f, `{"metadata": {"gap_seconds": 60}, "data": []}`, f + `: data: wrong number of data points "0": want 1..5000000`},
		{"negative count", f, `{"metadata": {"gap_seconds": 60}, "data": [1, -1]}`, f + `: data[1]: invalid value "-1": want a count of instances 0..1000000`},
		{"string count", f, `{"metadata": {"gap_seconds": 60}, "data": [1, "2"]}`, f + `: data[1]: invalid value "\"2\"": want a count of instances 0..1000000`},
		{"trailing", f, `{"metadata": {"gap_seconds": 60}, "data": [1]} {}`, f + `: data after the trace: want one JSON object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpotTrace(tc.file, strings.NewReader(tc.in))
			var se *SeriesError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T), want a *SeriesError", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestSpotTraceRegion(t *testing.T) {
	for zone, want := range map[string]string{"us-west-2a": "us-west-2", "us-central1-a": "us-central1", "eu-west-1": "eu-west-1", "cd1": "cd1"} {
		if got := (&SpotTrace{Zone: zone}).Region(); got != want {
			t.Errorf("Region(%s) = %s, want %s", zone, got, want)
		}
	}
}

// Two zones of one region cover the region's V100 spot offer: counts add
// up, a zone at its probe's size lifts the limit, and the series repeats.
func TestSpotAvailability(t *testing.T) {
	v100 := core.Offer{ID: "aws/us-east-1/p3.2xlarge", Region: "us-east-1", GPUModel: "NVIDIA Tesla V100", GPUs: 1,
		Plans: []core.PricePlan{{Mode: core.Spot}, {Mode: core.OnDemand}}}
	far := v100
	far.ID, far.Region = "aws/eu-west-1/p3.2xlarge", "eu-west-1"
	big := v100
	big.ID, big.GPUs = "aws/us-east-1/p3.16xlarge", 8
	a := &SpotTrace{File: "a", Zone: "us-east-1a", GPU: "v100", GPUs: 1, Nodes: 4, Gap: time.Minute, Counts: []int{0, 1, 4, 2}}
	b := &SpotTrace{File: "b", Zone: "us-east-1b", GPU: "v100", GPUs: 1, Nodes: 4, Gap: 2 * time.Minute, Counts: []int{0, 2}}
	cpu := &SpotTrace{File: "cpu", Zone: "us-east-1b", GPU: "intel", GPUs: 64, Gap: time.Minute, Counts: []int{1}}
	av, cov, unused := SpotAvailability([]*SpotTrace{a, b, cpu}, []core.Offer{v100, far, big}, 6*time.Minute)
	wantCov := []SpotCoverage{{Offer: v100.ID, Files: []string{"a", "b"}}}
	if diff := cmp.Diff(wantCov, cov); diff != "" {
		t.Errorf("coverage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"cpu"}, unused); diff != "" {
		t.Errorf("unused (-want +got):\n%s", diff)
	}
	// minute: a 0 1 4 2 0 1; b 0 0 2 2 0 0 → 0, 1, unlimited, 4, 0, 1.
	step := func(m, limit int, ok bool) Step {
		return Step{Relative: true, Offset: time.Duration(m) * time.Minute, Offer: v100.ID, Available: ok, Limit: limit}
	}
	want := []Step{step(0, 0, false), step(1, 1, true), step(2, 0, true), step(3, 4, true), step(4, 0, false), step(5, 1, true)}
	if diff := cmp.Diff(want, av.Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	// A trace of a region the catalog lacks covers the model's offers of
	// every region.
	w := &SpotTrace{File: "w", Zone: "us-west-2a", GPU: "V100", GPUs: 1, Gap: time.Minute, Counts: []int{1}}
	_, cov, _ = SpotAvailability([]*SpotTrace{w}, []core.Offer{v100, far, big}, time.Minute)
	wantCov = []SpotCoverage{{Offer: far.ID, Files: []string{"w"}, OtherRegion: true}, {Offer: v100.ID, Files: []string{"w"}, OtherRegion: true}}
	if diff := cmp.Diff(wantCov, cov); diff != "" {
		t.Errorf("other-region coverage (-want +got):\n%s", diff)
	}
}

// A count below the machines alive reclaims the newest; at the count no
// further spot machine is rented.
func TestSpotCountLimit(t *testing.T) {
	a := &Availability{Steps: []Step{
		{Relative: true, Offer: gpuOffer, Available: true, Limit: 2},
		{Relative: true, Offset: 10 * time.Minute, Offer: gpuOffer, Available: true, Limit: 1},
		{Relative: true, Offset: 20 * time.Minute, Offer: gpuOffer, Available: true},
	}}
	w := newWorld(t, 1, Config{Availability: a})
	w.acquire("a", gpuOffer, core.Spot)
	w.acquire("b", gpuOffer, core.Spot)
	if _, err := w.cloud.Acquire(t.Context(), provider.AcquireRequest{ClientToken: "c", OfferID: gpuOffer, Mode: core.Spot}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("third spot machine with 2 obtainable: %v, want ErrCapacity", err)
	}
	w.acquire("d", gpuOffer, core.OnDemand) // on-demand is not counted
	w.at(10 * time.Minute)
	want := []string{"+0s sim-000001 ready", "+0s sim-000002 ready", "+0s sim-000003 ready", "+10m0s sim-000002 reclaiming at +12m0s"}
	if diff := cmp.Diff(want, w.poll()); diff != "" {
		t.Errorf("poll at +10m (-want +got):\n%s", diff)
	}
	w.at(20 * time.Minute)
	w.acquire("e", gpuOffer, core.Spot)
	w.acquire("f", gpuOffer, core.Spot)
}

// A spot plan without a reclaim model is reclaimed at DefaultReclaimBP.
func TestDefaultReclaimRate(t *testing.T) {
	for _, bp := range []int64{0, ConservativeReclaimBP} {
		w := newWorld(t, 7, Config{DefaultReclaimBP: bp})
		for i := range 200 {
			w.acquire(string(rune('a'+i%26))+string(rune('a'+i/26)), bareSpot, core.Spot)
		}
		w.at(730 * time.Hour)
		notices := 0
		for _, l := range w.poll() {
			if strings.Contains(l, "reclaiming") {
				notices++
			}
		}
		// 25% a month: about 50 of 200 within the month.
		if bp == 0 && notices != 0 || bp > 0 && (notices < 30 || notices > 70) {
			t.Errorf("DefaultReclaimBP %d: %d of 200 bare spot machines noticed in a month", bp, notices)
		}
	}
	if _, err := New(Config{Source: nil}); err == nil {
		t.Error("New without a source: no error")
	}
}

// The synthetic traces in testdata (the published layout) parse and
// cover the V100 spot offer.
func TestSyntheticSpotTraces(t *testing.T) {
	var traces []*SpotTrace
	root := "testdata/spot-traces"
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, p)
		tr, err := ParseSpotTrace(filepath.ToSlash(rel), f)
		traces = append(traces, tr)
		return err
	})
	if err != nil || len(traces) != 3 {
		t.Fatalf("%d traces, %v", len(traces), err)
	}
	v100 := core.Offer{ID: "v", Region: "us-east-1", GPUModel: "NVIDIA Tesla V100", GPUs: 1, Plans: []core.PricePlan{{Mode: core.Spot}}}
	a, cov, unused := SpotAvailability(traces, []core.Offer{v100}, 72*time.Hour)
	if len(cov) != 1 || len(cov[0].Files) != 3 || len(unused) != 0 || len(a.Steps) < 10 {
		t.Errorf("coverage %+v, unused %v, %d steps", cov, unused, len(a.Steps))
	}
}

// FuzzParseSpotTrace: any input parses into a trace with a positive gap
// and counts in range, or fails with a *SeriesError.
func FuzzParseSpotTrace(f *testing.F) {
	for _, s := range []string{
		`{"metadata": {"gap_seconds": 300}, "data": [0, 5, 16]}`,
		`{"data":[1,1,0],"metadata":{"gap_seconds":32}}`,
		`{"metadata": {"gap_seconds": 1.5}, "data": [1]}`,
		`{"metadata": {"gap_seconds": 60}, "data": [1, "2", -1, 1e3]}`,
		`{"metadata": {}, "data": null}`,
		`[]`, ``,
	} {
		f.Add("availability/16-node/x/us-west-2a_v100_1.json", s)
	}
	f.Add("us-central1-a_c3-88.json", `{"metadata": {"gap_seconds": 30}, "data": [1]}`)
	f.Fuzz(func(t *testing.T, name, in string) {
		tr, err := ParseSpotTrace(name, strings.NewReader(in))
		if err != nil {
			var se *SeriesError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is %T, want *SeriesError", err, err)
			}
			return
		}
		if tr.Gap <= 0 || len(tr.Counts) == 0 || tr.probe() < 1 {
			t.Fatalf("gap %v, %d counts, probe %d", tr.Gap, len(tr.Counts), tr.probe())
		}
		for _, c := range tr.Counts {
			if c < 0 || c > maxSpotTraceCount {
				t.Fatalf("count %d", c)
			}
		}
		_ = tr.Region()
	})
}
