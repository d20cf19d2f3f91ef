package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpufleet/gpufleet/internal/core"
)

// SpotTrace is one file of spot availability or preemption counts in the
// layout SkyPilot published for "Can't Be Late" (NSDI'24,
// github.com/skypilot-org/spot-traces):
//
//	{"metadata": {"gap_seconds": 300}, "data": [0, 0, 5, 16, 16, …]}
//
// one file per zone and instance type, named ZONE_GPU_COUNT.json
// ("us-west-2a_v100_1.json": p3.2xlarge, one V100, in us-west-2a) under a
// folder K-node ("16-node": the probe asked for 16 instances). Each value
// is the number of instances obtainable (availability traces) or alive
// (preemption traces) during its gap_seconds-long tick. A count equal to
// the probe's size means "as many as asked": at least that many.
type SpotTrace struct {
	// File is the path the trace was read from, for messages; Zone, GPU
	// and GPUs come from its name, Nodes from its folder (0: unknown,
	// then the largest count in Data stands for it).
	File  string
	Zone  string
	GPU   string
	GPUs  int
	Nodes int
	// Gap is the length of a tick; Counts one value per tick.
	Gap    time.Duration
	Counts []int
}

// Limits on a spot trace.
const (
	maxSpotTraceBytes = 64 << 20
	maxSpotTraceTicks = 5_000_000
	maxSpotTraceCount = 1_000_000
	maxSpotTraceGap   = 24 * 3600
)

// ParseSpotTrace reads one spot trace. name is its path (relative to the
// trace folder), from which the zone, GPU model, GPUs per instance and
// probe size are read. Errors are *SeriesError naming the file, the field
// (metadata.gap_seconds, data[i]) and the value.
func ParseSpotTrace(name string, r io.Reader) (*SpotTrace, error) {
	bad := func(field, value, problem, allowed string) error {
		return &SeriesError{File: name, Field: field, Value: value, Problem: problem, Allowed: allowed}
	}
	t := &SpotTrace{File: name}
	base := strings.TrimSuffix(path.Base(name), ".json")
	parts := strings.Split(base, "_")
	if !strings.HasSuffix(name, ".json") || len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return nil, bad("", path.Base(name), "unexpected file name", "ZONE_GPU_COUNT.json, as us-west-2a_v100_1.json")
	}
	t.Zone, t.GPU = parts[0], parts[1]
	if len(parts) == 3 {
		n, err := strconv.Atoi(parts[2])
		if err != nil || n < 1 || n > 1024 || strconv.Itoa(n) != parts[2] {
			return nil, bad("", path.Base(name), "unexpected GPU count in the file name", "ZONE_GPU_COUNT.json with COUNT 1..1024 GPUs per instance")
		}
		t.GPUs = n
	}
	// A folder K-node names the probe: 1-node, 4-node, 16-node.
	for _, d := range strings.Split(path.Dir(name), "/") {
		if k, ok := strings.CutSuffix(d, "-node"); ok {
			n, err := strconv.Atoi(k)
			if err != nil || n < 1 || n > maxSpotTraceCount || strconv.Itoa(n) != k {
				return nil, bad("", d, "unexpected probe folder", "K-node with K 1.."+strconv.Itoa(maxSpotTraceCount))
			}
			t.Nodes = n
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, maxSpotTraceBytes+1))
	if err != nil {
		return nil, &SeriesError{File: name, Problem: "cannot read", Err: err}
	}
	if len(data) > maxSpotTraceBytes {
		return nil, bad("", "", "file too large", fmt.Sprintf("at most %d MiB", maxSpotTraceBytes>>20))
	}
	if !utf8.Valid(data) {
		return nil, bad("", "", "not UTF-8 text", "a JSON file in UTF-8")
	}
	var doc struct {
		// Metadata may carry more than the gap; only the gap is read.
		Metadata map[string]json.RawMessage `json:"metadata"`
		Data     []json.RawMessage          `json:"data"`
	}
	// Other keys are left alone: some published files carry "prices".
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, &SeriesError{File: name, Problem: "not a spot trace", Allowed: `JSON {"metadata": {"gap_seconds": N}, "data": [counts]}`, Err: err}
	}
	if dec.More() {
		return nil, bad("", "", "data after the trace", "one JSON object")
	}
	rawGap, ok := doc.Metadata["gap_seconds"]
	if !ok {
		return nil, bad("metadata.gap_seconds", "", "missing", "the seconds between two data points, 1.."+strconv.Itoa(maxSpotTraceGap))
	}
	gap, ok := wholeNumber(rawGap)
	if !ok || gap < 1 || gap > maxSpotTraceGap {
		return nil, bad("metadata.gap_seconds", string(rawGap), "", "whole seconds 1.."+strconv.Itoa(maxSpotTraceGap))
	}
	t.Gap = time.Duration(gap) * time.Second
	if len(doc.Data) == 0 || len(doc.Data) > maxSpotTraceTicks {
		return nil, bad("data", fmt.Sprint(len(doc.Data)), "wrong number of data points", "1.."+strconv.Itoa(maxSpotTraceTicks))
	}
	t.Counts = make([]int, len(doc.Data))
	for i, raw := range doc.Data {
		n, ok := wholeNumber(raw)
		if !ok || n < 0 || n > maxSpotTraceCount {
			return nil, bad(fmt.Sprintf("data[%d]", i), string(raw), "", "a count of instances 0.."+strconv.Itoa(maxSpotTraceCount))
		}
		t.Counts[i] = int(n)
	}
	return t, nil
}

// wholeNumber reads a JSON number without fraction or exponent.
func wholeNumber(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// modelIs reports whether a catalog's GPU model ("NVIDIA Tesla V100") is
// a trace's GPU ("v100"): the whole model or one of its words, case aside.
func modelIs(model, gpu string) bool {
	if strings.EqualFold(model, gpu) {
		return true
	}
	for _, w := range strings.Fields(model) {
		if strings.EqualFold(w, gpu) {
			return true
		}
	}
	return false
}

// probe is the count that means "as many as asked".
func (t *SpotTrace) probe() int {
	if t.Nodes > 0 {
		return t.Nodes
	}
	return max(slices.Max(t.Counts), 1)
}

// Region is the trace zone's region: us-west-2a is in us-west-2,
// us-central1-a in us-central1.
func (t *SpotTrace) Region() string {
	z := t.Zone
	if i := strings.LastIndexByte(z, '-'); i > 0 && len(z)-i == 2 && z[i+1] >= 'a' && z[i+1] <= 'z' {
		return z[:i] // GCP: us-central1-a
	}
	if n := len(z); n > 1 && z[n-1] >= 'a' && z[n-1] <= 'z' && z[n-2] >= '0' && z[n-2] <= '9' {
		return z[:n-1] // AWS: us-west-2a
	}
	return z
}

// at is the trace's count at offset d from its start; the trace repeats
// when it runs out.
func (t *SpotTrace) at(d time.Duration) int {
	return t.Counts[int(d/t.Gap)%len(t.Counts)]
}

// SpotCoverage says which traces decide an offer's spot availability.
type SpotCoverage struct {
	Offer string
	// Files are the traces, one per zone; OtherRegion is set when no
	// offer of the traces' own region matched and the offer, of another
	// region, takes them (same GPU model and count).
	Files       []string
	OtherRegion bool
}

// SpotAvailability turns spot traces into an availability series over
// offers, from the simulation's start (the traces' first tick) to
// horizon, each trace repeated when it runs out. A trace covers the spot
// offers of its GPU model (case aside) and GPUs per instance in its
// zone's region, or, when its region has none, those of every region.
// An offer's count at a time is the sum over the zones covering it (its
// machines may go to any of them), unlimited while any zone stands at
// its probe's size. Traces that cover no offer (a CPU instance, a GPU the
// catalog lacks) are returned in unused.
func SpotAvailability(traces []*SpotTrace, offers []core.Offer, horizon time.Duration) (a *Availability, cov []SpotCoverage, unused []string) {
	by := map[string][]*SpotTrace{}
	other := map[string]bool{}
	var far []*SpotTrace // traces of a region without a matching offer
	match := func(t *SpotTrace, sameRegion bool) []string {
		var ids []string
		for i := range offers {
			o := &offers[i]
			if _, ok := o.Plan(core.Spot); !ok || !modelIs(o.GPUModel, t.GPU) || t.GPUs > 0 && o.GPUs != t.GPUs {
				continue
			}
			if !sameRegion || o.Region == t.Region() {
				ids = append(ids, o.ID)
			}
		}
		return ids
	}
	for _, t := range traces {
		ids := match(t, true)
		if len(ids) == 0 {
			far = append(far, t)
		}
		for _, id := range ids {
			by[id] = append(by[id], t)
		}
	}
	// A trace of another region stands in only for offers no trace of
	// their own region covers.
	for _, t := range far {
		n := 0
		for _, id := range match(t, false) {
			if len(by[id]) > 0 && !other[id] {
				continue
			}
			by[id] = append(by[id], t)
			other[id] = true
			n++
		}
		if n == 0 {
			unused = append(unused, t.File)
		}
	}
	a = &Availability{File: "spot traces"}
	ids := make([]string, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ts := by[id]
		files := make([]string, len(ts))
		for i, t := range ts {
			files[i] = t.File
		}
		cov = append(cov, SpotCoverage{Offer: id, Files: files, OtherRegion: other[id]})
		// Every tick boundary of every zone, in time order.
		var edges []time.Duration
		for _, t := range ts {
			for d := time.Duration(0); d < horizon; d += t.Gap {
				edges = append(edges, d)
			}
		}
		slices.Sort(edges)
		edges = slices.Compact(edges)
		prev := Step{Available: true}
		for i, d := range edges {
			st := Step{Relative: true, Offset: d, Offer: id, Available: true}
			sum := 0
			for _, t := range ts {
				n := t.at(d)
				if n >= t.probe() {
					sum = -1
					break
				}
				sum += n
			}
			switch {
			case sum == 0:
				st.Available = false
			case sum > 0:
				st.Limit = sum
			}
			if i == 0 || st.Available != prev.Available || st.Limit != prev.Limit {
				a.Steps = append(a.Steps, st)
				prev = st
			}
		}
	}
	// Steps of several offers, each in time order: merged into one order.
	slices.SortStableFunc(a.Steps, func(x, y Step) int { return cmp.Compare(x.Offset, y.Offset) })
	return a, cov, unused
}
