package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
)

func sharePod(ns, name, fraction string) pod {
	return gpuPod(ns, name, 0).ann(KeyGPUFraction, fraction)
}

// reservationOf is a reservation pod of gpufleet's on node, with the
// device ID its container reported ("" none yet).
func reservationOf(name, node, id string) *corev1.Pod {
	p := ReservationPod(Options{}, name, node)
	p.UID = types.UID("uid-" + name)
	p.CreationTimestamp = metav1.NewTime(t0)
	if id != "" {
		p.Annotations = map[string]string{KeyGPUID: id}
	}
	return p
}

func TestShareSpec(t *testing.T) {
	tests := []struct {
		name        string
		pod         pod
		milli       core.Milli
		mem         int64
		err         string
		wantNoShare bool
	}{
		{name: "half", pod: sharePod("r", "a", "0.5"), milli: 500},
		{name: "a thousandth", pod: sharePod("r", "a", "0.001"), milli: 1},
		{name: "fraction and memory", pod: sharePod("r", "a", "0.25").ann(KeyGPUMemory, "20Gi"), milli: 250, mem: 20480},
		{name: "memory alone", pod: gpuPod("r", "a", 0).ann(KeyGPUMemory, "2000Mi"), mem: 2000},
		{name: "from a label", pod: gpuPod("r", "a", 0).label(KeyGPUFraction, "0.75"), milli: 750},
		{name: "whole", pod: gpuPod("r", "a", 1), wantNoShare: true},
		{name: "one is no share", pod: sharePod("r", "a", "1"),
			err: `gpufleet.io/gpu-fraction: invalid value "1": want a share of one GPU above 0 and below 1, to a thousandth (0.25, 0.5); a whole GPU is nvidia.com/gpu: 1`},
		{name: "a percentage", pod: sharePod("r", "a", "50%"),
			err: `gpufleet.io/gpu-fraction: invalid value "50%": want a share of one GPU above 0 and below 1`},
		{name: "zero", pod: sharePod("r", "a", "0"), err: `gpufleet.io/gpu-fraction: invalid value "0": want a share`},
		{name: "under a thousandth", pod: sharePod("r", "a", "0.0001"), err: `gpufleet.io/gpu-fraction: invalid value "0.0001"`},
		{name: "memory without a unit", pod: sharePod("r", "a", "0.5").ann(KeyGPUMemory, "2000"),
			err: `gpufleet.io/gpu-memory: invalid value "2000": want GPU memory as a quantity from 1Mi to 1Ei (20Gi, 2000Mi)`},
		{name: "memory past int64's bytes", pod: sharePod("r", "a", "0.5").ann(KeyGPUMemory, "8Ei"),
			err: `gpufleet.io/gpu-memory: invalid value "8Ei": want GPU memory as a quantity from 1Mi to 1Ei`},
		{name: "and whole GPUs", pod: gpuPod("r", "a", 1).ann(KeyGPUFraction, "0.5"),
			err: `gpufleet.io/gpu-fraction: invalid value "0.5": want a pod that shares a GPU requests no nvidia.com/gpu (this one requests 1)`},
		{name: "in a gang", pod: sharePod("r", "a", "0.5").gang("g", 2),
			err: `gpufleet.io/gang: invalid value "g": want no gang for a pod that shares a GPU`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := PodSpec(tt.pod.Pod, Options{})
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("error %v; want one starting %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Shares() == tt.wantNoShare || s.Milli != tt.milli || s.MemMiB != tt.mem || s.GPUs != 1 {
				t.Errorf("spec shares %t, %d milli, %d MiB, %d GPUs; want shares %t, %d milli, %d MiB, 1 GPU", s.Shares(), s.Milli, s.MemMiB, s.GPUs, !tt.wantNoShare, tt.milli, tt.mem)
			}
		})
	}
}

// TestBuildShares: a reservation that pods share is one GPU index of its node,
// its pods running there; a reservation no pod shares holds its GPU and
// is released; a pod placed on a reservation that has reported its GPU
// is bound, one whose has not waits; the engine packs a new share onto
// the partly used GPU, never over its memory, and a share that fits no
// used GPU makes a new reservation.
func TestBuildShares(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1", 4, "A100").label(LabelGPUMemory, "81920").Node}
	pods := []*corev1.Pod{
		reservationOf("gpu-n1-0", "n1", "GPU-aaa"),
		reservationOf("gpu-n1-1", "n1", ""),
		reservationOf("gpu-n1-2", "n1", "GPU-ccc"), // no pod shares it
		sharePod("r", "bound", "0.5").ann(KeyGPUGroup, "gpu-n1-0").on("n1").Pod,
		sharePod("r", "placed", "0.25").ann(KeyGPUGroup, "gpu-n1-1").Pod,
		gpuPod("r", "whole", 1).on("n1").Pod,
		// 0.25 of compute but 50 GiB of memory: no room beside bound's 40.
		sharePod("r", "big", "0.25").ann(KeyGPUMemory, "50Gi").Pod,
		sharePod("r", "small", "0.5").Pod,
	}
	w := Build(nodes, pods, Options{})
	if l := w.State.Leases; len(l) != 1 || l[0].Offer.GPUs != 3 {
		t.Fatalf("leases %v; want n1 with 3 GPUs (4 less the idle reservation's)", l)
	}
	want := []string{"r/big pending 1", "r/bound running 1 n1:1", "r/placed running 1 n1:1", "r/small pending 1", "r/whole running 1 n1:1"}
	if d := cmp.Diff(want, units(w)); d != "" {
		t.Errorf("units (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]PodRef{{Namespace: ReservationNamespace, Name: "gpu-n1-2", UID: "uid-gpu-n1-2"}}, w.Release); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
	var waits []string
	for _, wt := range w.Waits {
		waits = append(waits, wt.Pod.Name+": "+wt.Reason)
	}
	if d := cmp.Diff([]string{"placed: " + waitingForDevice("n1", ReservationNamespace, "gpu-n1-1")}, waits); d != "" {
		t.Errorf("waits (-want +got):\n%s", d)
	}
	// Said only once the reservation has had its moment to report.
	if len(w.Waits) == 1 && !w.Waits[0].NotBefore.Equal(t0.Add(deviceWait)) {
		t.Errorf("the wait is written from %s; want %s, the reservation's making and %s", w.Waits[0].NotBefore, t0.Add(deviceWait), deviceWait)
	}
	d := engine.Step(w.State, t0, engine.Config{NoAcquire: true, NoRelease: true})
	a := w.Actions(d)
	got := map[string]Share{}
	for _, bs := range a.Binds {
		for _, b := range bs {
			if b.Share == nil {
				t.Fatalf("bind %v has no share", b)
			}
			got[b.Pod.Name] = *b.Share
		}
	}
	// No GPU is free: small fits beside bound (0.5 + 0.5, 40 + 40 GiB),
	// big (50 GiB) only beside placed (60 GiB free), on a reservation
	// that has not reported its GPU: annotated, not bound.
	wantShares := map[string]Share{
		"small": {Reservation: "gpu-n1-0", Namespace: ReservationNamespace, Node: "n1", DeviceID: "GPU-aaa", MemMiB: 40960},
		"big":   {Reservation: "gpu-n1-1", Namespace: ReservationNamespace, Node: "n1", MemMiB: 51200},
	}
	if d := cmp.Diff(wantShares, got); d != "" {
		t.Errorf("shares (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]PodRef{{Namespace: ReservationNamespace, Name: "gpu-n1-2", UID: "uid-gpu-n1-2"}}, a.Release); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
}

// TestBuildSharesNewGPU: shares that fit no used GPU get a new
// reservation, two shares placed on one new GPU in one step the same
// one; memory is never oversubscribed: a share that fits no GPU waits.
// A reservation pod that ended is deleted.
func TestBuildSharesNewGPU(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1", 2, "A100").label(LabelGPUMemory, "81920").Node}
	// A reservation the kubelet refused (no GPU left to it): deleted, and
	// its name is not taken again while it is there.
	refused := reservationOf("gpu-n1-0", "n1", "")
	refused.Status.Phase = corev1.PodFailed
	pods := []*corev1.Pod{
		refused,
		gpuPod("r", "whole", 1).on("n1").Pod,
		sharePod("r", "a", "0.5").Pod,
		sharePod("r", "b", "0.5").Pod,
		sharePod("r", "c", "0.1").ann(KeyGPUMemory, "10Gi").Pod,
	}
	w := Build(nodes, pods, Options{})
	d := engine.Step(w.State, t0, engine.Config{NoAcquire: true, NoRelease: true})
	a := w.Actions(d)
	var placed []string
	for _, bs := range a.Binds {
		for _, b := range bs {
			placed = append(placed, b.Pod.Name+" "+b.Share.Reservation+" "+map[bool]string{true: "create", false: "exists"}[b.Share.Create])
		}
	}
	// a and b fill the one free GPU (its memory too: 40 + 40 GiB), so c
	// (10 GiB more) waits.
	if d := cmp.Diff([]string{"a gpu-n1-1 create", "b gpu-n1-1 create"}, placed, cmpSorted); d != "" {
		t.Errorf("placed (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]PodRef{{Namespace: ReservationNamespace, Name: "gpu-n1-0", UID: "uid-gpu-n1-0"}}, a.Release); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
	var waiting []string
	for _, wt := range a.Wait {
		waiting = append(waiting, wt.Pod.Name)
	}
	if d := cmp.Diff([]string{"c"}, waiting); d != "" {
		t.Errorf("waiting (-want +got):\n%s", d)
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

// FuzzShareSpec: whatever a pod's gpu-fraction and gpu-memory say, it
// is refused with the key named, or read as a share of 1..999
// milli-GPUs (0 with memory alone) and at least 1 MiB when memory is
// given.
func FuzzShareSpec(f *testing.F) {
	for _, s := range [][2]string{{"0.5", ""}, {"0.25", "20Gi"}, {"", "2000Mi"}, {"1", ""}, {"NaN", "1e3"}, {"-0", "-1Gi"}, {"0.9995", "1Ei"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, frac, mem string) {
		p := gpuPod("r", "a", 0)
		if frac != "" {
			p.ann(KeyGPUFraction, frac)
		}
		if mem != "" {
			p.ann(KeyGPUMemory, mem)
		}
		s, err := PodSpec(p.Pod, Options{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), KeyGPUFraction+": ") && !strings.HasPrefix(err.Error(), KeyGPUMemory+": ") &&
				!strings.HasPrefix(err.Error(), "resources nvidia.com/gpu: ") {
				t.Fatalf("error %q names neither key", err)
			}
			return
		}
		if frac == "" && mem == "" {
			return
		}
		if s.GPUs != 1 || s.Milli < 0 || s.Milli >= core.WholeGPU || (frac != "" && s.Milli < 1) || (mem != "" && s.MemMiB < 1) {
			t.Fatalf("fraction %q, memory %q read as %d GPUs, %d milli, %d MiB", frac, mem, s.GPUs, s.Milli, s.MemMiB)
		}
	})
}
