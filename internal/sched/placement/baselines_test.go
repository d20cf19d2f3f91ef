package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// The expected scores below are worked by hand from the artifact's
// formulas (hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin).

func TestBestFitScore(t *testing.T) {
	p := NewBestFit(nil)
	tests := []struct {
		name string
		n    core.Node
		r    core.Request
		want int64
	}{
		// 1 − (½·84/128 + ½·7/8) = 0.234375 → 23
		{"G2 empty, 12 cores and a GPU", node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000), whole(12, 1), 23},
		// 1 − (½·0 + ½·0) → 100: nothing left
		{"exact fill", node("T4", 4, 16, 1000), whole(4, 1), 100},
		// 1 − (½·60/128 + ½·0.5/8) = 0.734375 → 73
		{"share", node("T4", 64, 16, 1000), share(4, 500), 73},
		// 1 − ½·100/128 = 0.609375 → 60
		{"no GPU", node("T4", 104, 16), core.Request{CPUMilli: 4000}, 60},
	}
	for _, tt := range tests {
		if got := p.Score(&tt.n, &tt.r); got != tt.want {
			t.Errorf("%s: score %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestDotProdScore(t *testing.T) {
	p := NewDotProd(nil)
	n := node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
	// free (96/128, 8/8) · req (12/128, 1/8) = 0.0703125 + 0.125; /2 →
	// 0.09765625; 1 − that → 90.23 → 90
	r := whole(12, 1)
	if got := p.Score(&n, &r); got != 90 {
		t.Errorf("score %d, want 90", got)
	}
	// A fuller node aligns less: free (12/128, 1/8) → dot 0.0244; → 98
	small := node("G2", 12, 384, 0, 0, 0, 0, 0, 0, 0, 1000)
	if got := p.Score(&small, &r); got != 98 {
		t.Errorf("score on the fuller node %d, want 98", got)
	}
}

func TestGpuPackingScore(t *testing.T) {
	p := NewGpuPacking(nil)
	tests := []struct {
		name string
		n    core.Node
		r    core.Request
		want int64
	}{
		{"empty 8-GPU node: max(33-8, 8)", node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000), share(1, 500), 25},
		{"empty 2-GPU node: max(33-2, 2)", node("T4", 96, 384, 1000, 1000), whole(1, 1), 31},
		{"used node, one empty GPU taken: max(50-1, 33)", node("T4", 96, 384, 500, 1000), whole(1, 1), 49},
		{"used node, two empty GPUs taken", node("G2", 96, 384, 500, 1000, 1000, 1000), whole(1, 2), 48},
		{"shared GPU with 300 left: 100 - 30/10", node("T4", 96, 384, 300, 1000), share(1, 200), 97},
		{"least-left shared GPU chosen: 100 - 60/10", node("T4", 96, 384, 900, 600), share(1, 500), 94},
		{"a share that needs an empty GPU of a used node", node("T4", 96, 384, 100, 1000), share(1, 500), 49},
		{"no GPU asked", node("T4", 96, 384, 1000), core.Request{CPUMilli: 1000}, 0},
	}
	for _, tt := range tests {
		if got := p.Score(&tt.n, &tt.r); got != tt.want {
			t.Errorf("%s: score %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestGpuClusteringScore(t *testing.T) {
	p := NewGpuClustering(nil)
	nodes := []core.Node{
		node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000),
		node("G2", 96, 384, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000),
	}
	s := share(1, 500)
	w := whole(1, 1)
	// Empty nodes: 25·0/8000 + 25.
	if got := p.Score(nodes, 0, &s); got != 25 {
		t.Errorf("empty node: %d, want 25", got)
	}
	f := Fit{Node: 0, GPUs: []int{0}}
	if err := Apply(&nodes[0], f, &s); err != nil {
		t.Fatal(err)
	}
	p.Placed(nodes, &s, f)
	// Node 0 holds a share: 25·500/8000 = 1; same kind only → +75.
	if got := p.Score(nodes, 0, &s); got != 76 {
		t.Errorf("share on a share node: %d, want 76", got)
	}
	// A whole GPU there: other kinds only → 1.
	if got := p.Score(nodes, 0, &w); got != 1 {
		t.Errorf("whole on a share node: %d, want 1", got)
	}
	f1 := Fit{Node: 0, GPUs: []int{1}}
	if err := Apply(&nodes[0], f1, &w); err != nil {
		t.Fatal(err)
	}
	p.Placed(nodes, &w, f1)
	// Mixed node: 25·1500/8000 = 4, +50 for its own kind among others.
	if got := p.Score(nodes, 0, &s); got != 54 {
		t.Errorf("share on a mixed node: %d, want 54", got)
	}
	if got := p.Score(nodes, 0, &core.Request{CPUMilli: 1}); got != 0 {
		t.Errorf("no GPU: %d, want 0", got)
	}
	if err := Remove(&nodes[0], f, &s); err != nil {
		t.Fatal(err)
	}
	p.Removed(nodes, &s, f)
	if got := p.Score(nodes, 0, &w); got != 75+25*1000/8000 {
		t.Errorf("whole after the share left: %d, want 78", got)
	}
	// The share goes where shares are; the whole GPU stays away from them.
	got, _ := p.Place(nodes, &w)
	if got.Node != 0 {
		t.Errorf("whole placed on node %d, want 0 (its kind)", got.Node)
	}
}

func TestGPUChoice(t *testing.T) {
	n := node("G2", 96, 384, 1000, 700, 300, 1000)
	tests := []struct {
		name string
		p    Policy
		r    core.Request
		want []int
	}{
		{"best fit share", NewBestFit(nil), share(1, 300), []int{2}},
		{"best fit share skips the too small", NewBestFit(nil), share(1, 400), []int{1}},
		{"whole GPUs lowest first", NewDotProd(nil), whole(1, 2), []int{0, 3}},
		{"random without a source: the first that fits", NewRandom(nil), share(1, 400), []int{0}},
		{"random share from the source (always replacing: the last)", NewRandom(fixedRand{}), share(1, 400), []int{3}},
		{"no GPU", NewGpuPacking(nil), core.Request{CPUMilli: 1}, nil},
	}
	for _, tt := range tests {
		f, ok := tt.p.Place([]core.Node{n}, &tt.r)
		if !ok {
			t.Fatalf("%s: not placed", tt.name)
		}
		if diff := cmp.Diff(tt.want, f.GPUs); diff != "" {
			t.Errorf("%s: GPUs (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestTies(t *testing.T) {
	nodes := []core.Node{
		node("T4", 8, 8, 1000), node("T4", 8, 8, 1000), node("T4", 8, 8, 1000),
	}
	r := whole(1, 1)
	for _, p := range allPolicies(Workload{}, nil) {
		if f, _ := p.Place(nodes, &r); f.Node != 0 {
			t.Errorf("%s without a random source: tie to node %d, want the first", p.Name(), f.Node)
		}
	}
	// With a source, the reservoir draws among the tied; one that always
	// draws 0 replaces the choice at every tie and ends on the last.
	for _, p := range allPolicies(Workload{}, fixedRand{}) {
		f, _ := p.Place(nodes, &r)
		want := 2
		if p.Name() == "random" {
			want = 0 // feasible[0]
		}
		if f.Node != want {
			t.Errorf("%s with a source drawing 0: node %d, want %d", p.Name(), f.Node, want)
		}
	}
}
