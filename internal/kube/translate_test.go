package kube

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/sched"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// node is a builder of GPU nodes.
type node struct{ *corev1.Node }

func gpuNode(name string, gpus int64, product string) node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if gpus > 0 {
		n.Status.Allocatable[ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	if product != "" {
		n.Labels[LabelGPUProduct] = product
	}
	return node{n}
}

func (n node) label(k, v string) node { n.Labels[k] = v; return n }

// pod is a builder of pods.
type pod struct{ *corev1.Pod }

func gpuPod(ns, name string, gpus int64) pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(t0), Annotations: map[string]string{}, Labels: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: SchedulerName, Containers: []corev1.Container{{Name: "main"}}}}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return pod{p}
}

func (p pod) ann(k, v string) pod        { p.Annotations[k] = v; return p }
func (p pod) label(k, v string) pod      { p.Labels[k] = v; return p }
func (p pod) on(node string) pod         { p.Spec.NodeName = node; return p }
func (p pod) scheduler(s string) pod     { p.Spec.SchedulerName = s; return p }
func (p pod) priorityClass(c string) pod { p.Spec.PriorityClassName = c; return p }
func (p pod) gang(g string, n int) pod {
	return p.ann(KeyGang, g).ann(KeyGangSize, itoa(n))
}
func (p pod) models(m ...string) pod {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: LabelGPUProduct, Operator: corev1.NodeSelectorOpIn, Values: m}}}}}}}
	return p
}

func itoa(n int) string   { return strconv.Itoa(n) }
func fmtInt(n int) string { return strconv.Itoa(n) }

func TestPodSpec(t *testing.T) {
	deadline := time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC)
	opts := Options{Teams: map[string]string{"ml-prod": "ml"}}
	tests := []struct {
		name string
		pod  pod
		want Spec
		err  string
	}{
		{"defaults", gpuPod("research", "a", 1), Spec{Team: "research", Tier: core.TierRegular, GPUs: 1}, ""},
		{"team from the mapping", gpuPod("ml-prod", "a", 2), Spec{Team: "ml", Tier: core.TierRegular, GPUs: 2}, ""},
		{"every key", gpuPod("research", "a", 4).label(KeyTier, "core").ann(KeyDuration, "3h").ann(KeyDeadline, "2026-12-24T18:00:00Z").
			ann(KeyDeferrable, "true").ann(KeyInterruptible, "true").models("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"),
			Spec{Team: "research", Tier: core.TierCore, GPUs: 4, Duration: 3 * time.Hour, Deadline: deadline, Deferrable: true, Interruptible: true,
				Models: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}}, ""},
		{"annotation over label", gpuPod("r", "a", 1).label(KeyTier, "core").ann(KeyTier, "offline"), Spec{Team: "r", Tier: core.TierOffline, GPUs: 1}, ""},
		{"tier from the priority class", gpuPod("r", "a", 1).priorityClass("gpufleet-offline"), Spec{Team: "r", Tier: core.TierOffline, GPUs: 1}, ""},
		{"unknown priority class is regular", gpuPod("r", "a", 1).priorityClass("system-node-critical"), Spec{Team: "r", Tier: core.TierRegular, GPUs: 1}, ""},
		{"model from the nodeSelector", func() pod {
			p := gpuPod("r", "a", 1)
			p.Spec.NodeSelector = map[string]string{LabelGPUProduct: "Tesla-V100"}
			return p
		}(), Spec{Team: "r", Tier: core.TierRegular, GPUs: 1, Models: []string{"Tesla-V100"}}, ""},
		{"gang", gpuPod("r", "a", 8).gang("llm", 4), Spec{Team: "r", Tier: core.TierRegular, GPUs: 8, Gang: "llm", GangSize: 4}, ""},
		{"no GPU", gpuPod("r", "a", 0), Spec{}, `resources nvidia.com/gpu: invalid value "0"`},
		{"bad tier", gpuPod("r", "a", 1).ann(KeyTier, "urgent"), Spec{}, `gpufleet.io/tier: invalid value "urgent": want core, regular or offline`},
		{"bad duration", gpuPod("r", "a", 1).ann(KeyDuration, "3 hours"), Spec{}, `gpufleet.io/duration: invalid value "3 hours"`},
		{"bad deadline", gpuPod("r", "a", 1).ann(KeyDeadline, "tomorrow"), Spec{}, `gpufleet.io/deadline: invalid value "tomorrow"`},
		{"bad bool", gpuPod("r", "a", 1).ann(KeyInterruptible, "yes"), Spec{}, `gpufleet.io/interruptible: invalid value "yes"`},
		{"gang without size", gpuPod("r", "a", 1).ann(KeyGang, "g"), Spec{}, `gpufleet.io/gang-size: invalid value ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PodSpec(tt.pod.Pod, opts)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("PodSpec (-want +got):\n%s", d)
			}
		})
	}
}

func TestPodGPUs(t *testing.T) {
	p := gpuPod("r", "a", 2)
	always := corev1.ContainerRestartPolicyAlways
	one := corev1.ResourceList{ResourceGPU: resource.MustParse("1")}
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b", Resources: corev1.ResourceRequirements{Requests: one, Limits: one}})
	p.Spec.InitContainers = []corev1.Container{
		{Name: "init", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse("2")}}},
		{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Limits: one}},
	}
	if got := PodGPUs(p.Pod); got != 4 {
		t.Errorf("PodGPUs = %d, want 4 (2 + 1 + a 1-GPU sidecar; the 2-GPU init container runs before)", got)
	}
}

func TestNodeMachine(t *testing.T) {
	catalog := []core.Offer{
		{ID: "aws/us-east-1/p4d.24xlarge", Provider: "aws", Region: "us-east-1", InstanceType: "p4d.24xlarge", GPUModel: "A100", GPUs: 8, GPUMemMiB: 40960,
			Plans: []core.PricePlan{{Mode: core.Spot, Per: core.Hour}, {Mode: core.OnDemand, Per: core.Hour, Price: 32_770_000}}},
		{ID: "aws/us-west-2/p4d.24xlarge", Provider: "aws", Region: "us-west-2", InstanceType: "p4d.24xlarge", GPUModel: "A100", GPUs: 8, GPUMemMiB: 40960,
			Plans: []core.PricePlan{{Mode: core.OnDemand, Per: core.Hour, Price: 30_000_000}}},
		{ID: "idc/h100", Provider: "idc", GPUModel: "H100", GPUs: 8, GPUMemMiB: 81920, Plans: []core.PricePlan{{Mode: core.Monthly, Per: core.Month}}},
	}
	type out struct {
		Offer, Model string
		GPUs         int
		Mem          int64
		Mode         core.BillingMode
		Why          string
	}
	read := func(n node) out {
		m, why, ok := NodeMachine(n.Node, catalog)
		if !ok {
			return out{Why: why}
		}
		return out{Offer: m.Offer.ID, Model: m.Offer.GPUModel, GPUs: m.Offer.GPUs, Mem: m.Offer.GPUMemMiB, Mode: m.Offer.Plans[m.Plan].Mode}
	}
	cordoned := gpuNode("c", 8, "X")
	cordoned.Spec.Unschedulable = true
	notReady := gpuNode("n", 8, "X")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	tests := []struct {
		name string
		node node
		want out
	}{
		{"offer label", gpuNode("a", 8, "NVIDIA-H100-80GB-HBM3").label(LabelOffer, "idc/h100"), out{"idc/h100", "NVIDIA-H100-80GB-HBM3", 8, 81920, core.Monthly, ""}},
		{"instance type and region, on-demand plan", gpuNode("a", 8, "NVIDIA-A100-SXM4-40GB").label(LabelInstanceType, "p4d.24xlarge").label(corev1.LabelTopologyRegion, "us-west-2"),
			out{"aws/us-west-2/p4d.24xlarge", "NVIDIA-A100-SXM4-40GB", 8, 40960, core.OnDemand, ""}},
		{"memory label", gpuNode("a", 4, "Tesla-V100-SXM2-32GB").label(LabelGPUMemory, "32768").label(LabelInstanceType, "x1"),
			out{"kube/x1", "Tesla-V100-SXM2-32GB", 4, 32768, core.OnDemand, ""}},
		{"allocatable, not the catalog's count", gpuNode("a", 6, "").label(LabelOffer, "idc/h100"), out{"idc/h100", "H100", 6, 81920, core.Monthly, ""}},
		{"unknown node", gpuNode("a", 2, ""), out{"kube/node/a", "unknown", 2, 0, core.OnDemand, ""}},
		{"no GPU", gpuNode("a", 0, ""), out{Why: "no nvidia.com/gpu allocatable"}},
		{"cordoned", cordoned, out{Why: "cordoned (spec.unschedulable)"}},
		{"not ready", notReady, out{Why: "not Ready"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, read(tt.node)); d != "" {
				t.Errorf("NodeMachine (-want +got):\n%s", d)
			}
		})
	}
}

func TestExit(t *testing.T) {
	failed := gpuPod("r", "a", 1)
	failed.Status.Phase = corev1.PodFailed
	failed.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 7, Reason: "Error"}}}}
	ok := gpuPod("r", "b", 1)
	ok.Status.Phase = corev1.PodSucceeded
	running := gpuPod("r", "c", 1)
	running.Status.Phase = corev1.PodRunning
	type res struct {
		Code int
		Why  string
		OK   bool
	}
	for _, tt := range []struct {
		p    pod
		want res
	}{
		{failed, res{7, "pod failed: container main exited 7 (Error)", true}},
		{ok, res{0, "pod succeeded: every container exited 0", true}},
		{running, res{0, "", false}},
	} {
		c, w, o := Exit(tt.p.Pod)
		if d := cmp.Diff(tt.want, res{c, w, o}); d != "" {
			t.Errorf("Exit(%s) (-want +got):\n%s", tt.p.Name, d)
		}
	}
}

// units summarises a world's units: key, state, GPUs, parts.
func units(w *World) []string {
	var out []string
	for _, u := range w.State.Units {
		s := u.Key() + " " + string(u.State) + " " + fmtInt(u.Job.Request.GPUs)
		for _, p := range u.Parts {
			s += " " + p.LeaseID + ":" + fmtInt(len(p.GPUs))
		}
		out = append(out, s)
	}
	return out
}

func TestBuild(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1", 8, "A100").Node, gpuNode("n2", 4, "V100").Node, gpuNode("cpu", 0, "").Node}
	done := gpuPod("r", "done", 8).on("n1")
	done.Status.Phase = corev1.PodSucceeded
	deleting := gpuPod("r", "deleting", 1).on("n2")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	// A bound pod of gpufleet's whose spec cannot be read, being deleted
	// or not, is a running unit of its namespace's team.
	badEnding := gpuPod("r", "bad-ending", 1).ann(KeyTier, "urgent").on("n2")
	badEnding.DeletionTimestamp = &metav1.Time{Time: t0}
	pods := []*corev1.Pod{
		gpuPod("r", "other-scheduler", 2).scheduler("default-scheduler").on("n1").Pod,
		gpuPod("r", "other-pending", 2).scheduler("default-scheduler").Pod,
		done.Pod, deleting.Pod, badEnding.Pod,
		gpuPod("r", "run", 2).on("n1").Pod,
		gpuPod("r", "wait", 1).Pod,
		gpuPod("r", "bad", 1).ann(KeyTier, "urgent").Pod,
		gpuPod("r", "bad-bound", 1).ann(KeyTier, "urgent").on("n1").Pod,
		gpuPod("r", "w0", 2).gang("g", 2).on("n1").Pod,
		gpuPod("r", "w1", 2).gang("g", 2).on("n2").Pod,
		gpuPod("r", "h0", 1).gang("half", 3).Pod,
		gpuPod("r", "h1", 1).gang("half", 3).Pod,
	}
	w := Build(nodes, pods, Options{})
	var leases []string
	for _, l := range w.State.Leases {
		leases = append(leases, l.ID+" "+l.Offer.GPUModel+" "+fmtInt(l.Offer.GPUs))
	}
	if d := cmp.Diff([]string{"n1 A100 6", "n2 V100 4"}, leases); d != "" {
		t.Errorf("leases (-want +got):\n%s", d)
	}
	// The pod being deleted is a running unit of its team until gone.
	want := []string{"r/ending/deleting/uid-deleting running 1 n2:1", "r/run running 2 n1:2", "r/gang/g running 4 n1:2 n2:2", "r/wait pending 1",
		"r/unreadable/bad-ending/uid-bad-ending running 1 n2:1", "r/unreadable/bad-bound/uid-bad-bound running 1 n1:1"}
	if d := cmp.Diff(want, units(w)); d != "" {
		t.Errorf("units (-want +got):\n%s", d)
	}
	var waits []string
	for _, wt := range w.Waits {
		waits = append(waits, wt.Pod.Name+": "+wt.Reason)
	}
	wantWaits := []string{
		`bad: gpufleet.io/tier: invalid value "urgent": want core, regular or offline`,
		"h0: gang half has 2 of its 3 pods: nothing of it is bound before all exist",
		"h1: gang half has 2 of its 3 pods: nothing of it is bound before all exist",
	}
	if d := cmp.Diff(wantWaits, waits); d != "" {
		t.Errorf("waits (-want +got):\n%s", d)
	}
}

// step builds the world and steps the engine once at t0.
func step(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, cfg engine.Config) (*World, Actions) {
	t.Helper()
	w := Build(nodes, pods, Options{})
	cfg.NoAcquire, cfg.NoRelease = true, true
	d := engine.Step(w.State, t0, cfg)
	return w, w.Actions(d)
}

func binds(a Actions) [][]string {
	var out [][]string
	for _, bs := range a.Binds {
		var g []string
		for _, b := range bs {
			g = append(g, b.Pod.Name+"@"+b.Node)
		}
		out = append(out, g)
	}
	return out
}

func TestActionsPlaceGangWhole(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8, "A100").Node, gpuNode("b", 8, "A100").Node}
	var pods []*corev1.Pod
	for _, n := range []string{"w0", "w1", "w2", "w3"} {
		pods = append(pods, gpuPod("ml", n, 4).gang("llm", 4).Pod)
	}
	pods = append(pods, gpuPod("ml", "solo", 1).models("V100").Pod)
	_, a := step(t, nodes, pods, engine.Config{})
	want := [][]string{{"w0@a", "w1@a", "w2@b", "w3@b"}}
	if d := cmp.Diff(want, binds(a)); d != "" {
		t.Errorf("binds (-want +got):\n%s", d)
	}
	if len(a.Wait) != 1 || a.Wait[0].Pod.Name != "solo" || !strings.Contains(a.Wait[0].Reason, "V100") {
		t.Errorf("waits = %+v, want solo waiting with a reason naming V100", a.Wait)
	}
}

func TestActionsPreemptWaitsForVictims(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 4, "A100").Node}
	victim := gpuPod("ml", "batch", 4).label(KeyTier, "offline").ann(KeyInterruptible, "true").on("a")
	victim.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Hour)}
	urgent := gpuPod("ml", "serve", 4).label(KeyTier, "core")
	_, a := step(t, nodes, []*corev1.Pod{victim.Pod, urgent.Pod}, engine.Config{Sched: sched.Config{MinRuntime: time.Minute}})
	if d := cmp.Diff([]string{"batch true"}, evictions(a)); d != "" {
		t.Errorf("evictions (-want +got):\n%s", d)
	}
	if len(a.Binds) != 0 {
		t.Errorf("binds = %v, want none while the victim holds the GPUs", binds(a))
	}
	if len(a.Wait) != 1 || a.Wait[0].Pod.Name != "serve" || !strings.Contains(a.Wait[0].Reason, "once the pods preempted for it have exited") {
		t.Errorf("waits = %+v, want serve waiting for the victim", a.Wait)
	}
	// A controller's pod is its controller's to recreate.
	yes := true
	victim.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "batch", Controller: &yes}}
	_, a = step(t, nodes, []*corev1.Pod{victim.Pod, urgent.Pod}, engine.Config{Sched: sched.Config{MinRuntime: time.Minute}})
	if d := cmp.Diff([]string{"batch false"}, evictions(a)); d != "" {
		t.Errorf("evictions of a Job's pod (-want +got):\n%s", d)
	}
	// Once the victim is being deleted its GPUs are still held: nothing
	// is bound and nothing more evicted.
	victim.DeletionTimestamp = &metav1.Time{Time: t0}
	_, a = step(t, nodes, []*corev1.Pod{victim.Pod, urgent.Pod}, engine.Config{Sched: sched.Config{MinRuntime: time.Minute}})
	if len(a.Binds) != 0 || len(a.Evict) != 0 {
		t.Errorf("while the victim terminates: binds %v, evictions %v; want none", binds(a), evictions(a))
	}
}

func evictions(a Actions) []string {
	var out []string
	for _, e := range a.Evict {
		s := "false"
		if e.Recreate {
			s = "true"
		}
		out = append(out, e.Pod.Name+" "+s)
	}
	return out
}

func TestPodsOnParts(t *testing.T) {
	g := &group{pods: []*corev1.Pod{gpuPod("r", "a", 2).Pod, gpuPod("r", "b", 2).Pod}, perPod: 2}
	got, why := podsOnParts(g, engine.Place{Parts: []engine.Assigned{{LeaseID: "x", GPUs: []int{0, 1, 2}}, {LeaseID: "y", GPUs: []int{0}}}})
	if got != nil || !strings.Contains(why, "a pod cannot span nodes") {
		t.Errorf("podsOnParts = %v, %q; want a refusal naming the split", got, why)
	}
}

func TestReasonText(t *testing.T) {
	if got := ReasonText("no GPU free"); got != "gpufleet: no GPU free" {
		t.Errorf("ReasonText = %q", got)
	}
}

// A team's quota holds on the cluster: with 8 A100 GPUs guaranteed and
// no cohort to borrow from, team ml (namespaces ml and ml-dev) gets one
// 8-GPU pod placed of its three while 8 GPUs are free elsewhere and a
// team without a quota takes them; the third waits with the quota as its
// reason.
func TestBuildQuotas(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8, "A100").Node, gpuNode("b", 8, "A100").Node, gpuNode("c", 8, "A100").Node}
	pods := []*corev1.Pod{
		gpuPod("ml", "first", 8).Pod,
		gpuPod("ml-dev", "second", 8).Pod,
		gpuPod("vision", "other", 8).Pod,
	}
	o := Options{Teams: map[string]string{"ml-dev": "ml"},
		Quotas: []core.Team{{ID: "ml", Weight: 1, Quotas: []core.Quota{{GPUClass: "A100", Guaranteed: 8 * core.WholeGPU}}}}}
	w := Build(nodes, pods, o)
	if d := cmp.Diff(o.Quotas, w.State.Teams); d != "" {
		t.Errorf("engine teams (-want +got):\n%s", d)
	}
	d := engine.Step(w.State, t0, engine.Config{NoAcquire: true, NoRelease: true})
	a := w.Actions(d)
	var placed []string
	for _, b := range binds(a) {
		placed = append(placed, b...)
	}
	ml := 0
	for _, b := range placed {
		if !strings.HasPrefix(b, "other@") {
			ml++
		}
	}
	if ml != 1 || len(placed) != 2 {
		t.Errorf("placed %v; want other and one of team ml's two pods (quota 8 GPUs)", placed)
	}
	var why string
	for _, wt := range a.Wait {
		why += wt.Pod.Name + ": " + wt.Reason + "; "
	}
	if len(a.Wait) != 1 || !strings.Contains(why, "quota") {
		t.Errorf("waits: %s; want one of team ml's pods waiting on its quota", why)
	}
	// Build leaves the caller's teams alone.
	w.State.Teams[0].ID = "changed"
	if o.Quotas[0].ID != "ml" {
		t.Error("Build shares Options.Quotas with the engine's state")
	}
}

// A victim in its grace period holds its team's quota: a step that
// preempts binds nothing while a team has a quota (the engine frees the
// victim's quota at once), and the next step, with the victim ending,
// does not give its team the quota again.
func TestQuotaHeldThroughGracePeriod(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8, "A100").Node, gpuNode("b", 8, "A100").Node}
	victim := gpuPod("ml", "batch", 8).label(KeyTier, "offline").ann(KeyInterruptible, "true").on("a")
	victim.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Hour)}
	filler := gpuPod("vision", "filler", 7).label(KeyTier, "core").on("b").Pod // b: 1 GPU free
	urgent := gpuPod("vision", "urgent", 8).label(KeyTier, "core").Pod         // only a, once batch is gone
	more := gpuPod("ml", "more", 1).label(KeyTier, "offline").Pod              // fits b, within ml's quota once batch is gone
	o := Options{Quotas: []core.Team{{ID: "ml", Weight: 1, Quotas: []core.Quota{{GPUClass: "A100", Guaranteed: 8 * core.WholeGPU}}}}}
	cfg := engine.Config{NoAcquire: true, NoRelease: true, Sched: sched.Config{MinRuntime: time.Millisecond}}

	w := Build(nodes, []*corev1.Pod{victim.Pod, filler, urgent, more}, o)
	d := engine.Step(w.State, t0, cfg)
	a := w.Actions(d)
	if got := evictions(a); len(got) != 1 || got[0] != "batch true" {
		t.Fatalf("evictions %v; want batch", got)
	}
	if len(d.Place) == 0 {
		t.Fatal("the engine placed nothing beside the preemption: the test would show nothing held back")
	}
	if len(a.Binds) != 0 {
		t.Errorf("binds %v in the step that preempts, with quotas", binds(a))
	}

	// Next step: batch is ending on a and holds ml's 8 GPUs of quota.
	ending := victim.DeepCopy()
	ending.DeletionTimestamp = &metav1.Time{Time: t0}
	w = Build(nodes, []*corev1.Pod{ending, filler, urgent, more}, o)
	a = w.Actions(engine.Step(w.State, t0.Add(time.Second), cfg))
	if len(a.Binds) != 0 || len(a.Evict) != 0 {
		t.Errorf("while batch ends: binds %v, evictions %v; want none (ml's quota is batch's)", binds(a), evictions(a))
	}
	why := waitReason(a, "more")
	if !strings.Contains(why, "quota") {
		t.Errorf("ml/more waits with %q; want its quota named", why)
	}

	// Without quotas a preempting step still binds what it may.
	w = Build(nodes, []*corev1.Pod{victim.Pod, filler, urgent, more}, Options{})
	a = w.Actions(engine.Step(w.State, t0, cfg))
	if d := cmp.Diff([][]string{{"more@b"}}, binds(a)); len(evictions(a)) != 1 || d != "" {
		t.Errorf("without quotas: evictions %v, binds (-want +got):\n%s", evictions(a), d)
	}
}

// waitReason is the reason the actions give pod name for waiting, or "".
func waitReason(a Actions, name string) string {
	for _, wt := range a.Wait {
		if wt.Pod.Name == name {
			return wt.Reason
		}
	}
	return ""
}

// A bound pod whose spec cannot be read (its tier annotation edited
// after binding) holds its namespace's team's quota: the team's next pod
// waits on the quota rather than running past it.
func TestQuotaHeldByUnreadablePod(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8, "A100").Node, gpuNode("b", 8, "A100").Node}
	bad := gpuPod("ml", "edited", 8).ann(KeyTier, "urgent").on("a").Pod
	next := gpuPod("ml", "next", 8).Pod
	o := Options{Quotas: []core.Team{{ID: "ml", Weight: 1, Quotas: []core.Quota{{GPUClass: "A100", Guaranteed: 8 * core.WholeGPU}}}}}
	w := Build(nodes, []*corev1.Pod{bad, next}, o)
	a := w.Actions(engine.Step(w.State, t0, engine.Config{NoAcquire: true, NoRelease: true}))
	if len(a.Binds) != 0 || len(a.Evict) != 0 {
		t.Errorf("binds %v, evictions %v; want none: ml's 8 GPUs of quota are the edited pod's", binds(a), evictions(a))
	}
	why := waitReason(a, "next")
	if !strings.Contains(why, "quota") {
		t.Errorf("ml/next waits with %q; want its quota named", why)
	}
	// Without the quota, next goes to b, not onto the edited pod's GPUs.
	w = Build(nodes, []*corev1.Pod{bad, next}, Options{})
	a = w.Actions(engine.Step(w.State, t0, engine.Config{NoAcquire: true, NoRelease: true}))
	if d := cmp.Diff([][]string{{"next@b"}}, binds(a)); d != "" {
		t.Errorf("without quotas, binds (-want +got):\n%s", d)
	}
}

// A gang's pod still running once the others finished (KWOK and real
// kubelets end a gang's pods tens of milliseconds apart) is no unit of
// the gang, but holds its node's GPUs and its team's quota until it
// ends: the engine does not give the team its quota again meanwhile.
// TestClusterHeliosJobs saw team nlp hold 40 of its 32 A100s when a
// 16-GPU gang was placed in such a window.
func TestQuotaHeldByGangPodLeftRunning(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8, "A100").Node, gpuNode("b", 8, "A100").Node, gpuNode("c", 8, "A100").Node}
	done := gpuPod("ml", "old-0", 8).gang("old", 2).on("b")
	done.Status.Phase = corev1.PodSucceeded
	left := gpuPod("ml", "old-1", 8).gang("old", 2).on("a")
	left.Status.Phase = corev1.PodRunning
	left.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Minute)}
	pods := []*corev1.Pod{done.Pod, left.Pod,
		gpuPod("ml", "new-0", 8).gang("new", 2).Pod, gpuPod("ml", "new-1", 8).gang("new", 2).Pod, // 16 more: over the quota
		gpuPod("ml", "small", 8).Pod, // 8 more: within it
	}
	o := Options{Quotas: []core.Team{{ID: "ml", Weight: 1, Quotas: []core.Quota{{GPUClass: "A100", Guaranteed: 16 * core.WholeGPU}}}}}
	cfg := engine.Config{NoAcquire: true, NoRelease: true, Sched: sched.Config{MinRuntime: time.Millisecond}}
	w := Build(nodes, pods, o)
	a := w.Actions(engine.Step(w.State, t0, cfg))
	got := binds(a)
	if len(got) != 1 || len(got[0]) != 1 || !strings.HasPrefix(got[0][0], "small@") || got[0][0] == "small@a" {
		t.Errorf("binds %v; want small alone, on b or c (team ml holds 8 of its 16 GPUs through old-1 on a)", got)
	}
	why := map[string]string{}
	for _, wt := range a.Wait {
		why[wt.Pod.Name] = wt.Reason
	}
	if !strings.Contains(why["new-0"], "quota") || !strings.Contains(why["new-1"], "quota") {
		t.Errorf("the gang new waits with %q, %q; want its team's quota named", why["new-0"], why["new-1"])
	}
	if len(a.Evict) != 0 {
		t.Errorf("evictions %v; old-1 is no unit to preempt", evictions(a))
	}
}
