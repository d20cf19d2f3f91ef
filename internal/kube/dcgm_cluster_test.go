package kube

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/fleet"
	"github.com/gpufleet/gpufleet/internal/kubetest"
)

// fakeExporter plays one node's dcgm-exporter. The exporter is faked
// because no GPU exists on the test cluster: it writes the exposition
// text the real exporter writes in its Kubernetes mode (the layout of
// testdata/dcgm-k8s.prom: HELP and TYPE lines, labels gpu, UUID, device,
// modelName, Hostname, DCGM_FI_DRIVER_VERSION, container, namespace,
// pod), one GPU per nvidia.com/gpu of each running pod bound to its node
// as the apiserver shows them (the real exporter asks the kubelet's
// pod-resources API), utilization from util by pod. What reads it —
// discovery of the exporter pods through the apiserver, the HTTP scrape,
// promtext's parser, the mapping to pods, the ladder — is the real code.
type fakeExporter struct {
	c      *kubetest.Cluster
	node   string
	status int
	util   *utilTable
	mu     sync.Mutex
	hits   int
}

// utilTable is the utilization the exporters say of each pod.
type utilTable struct {
	mu sync.Mutex
	m  map[string]int // namespace/pod → percent
}

func (u *utilTable) get(k string) int    { u.mu.Lock(); defer u.mu.Unlock(); return u.m[k] }
func (u *utilTable) set(k string, v int) { u.mu.Lock(); defer u.mu.Unlock(); u.m[k] = v }

func (e *fakeExporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.hits++
	status := e.status
	e.mu.Unlock()
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	if status != http.StatusOK {
		http.Error(w, "dcgm: no GPU found", status)
		return
	}
	l, err := e.c.Client.CoreV1().Pods("").List(r.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", e.node).String()})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pods := l.Items
	sort.Slice(pods, func(i, j int) bool { return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name })
	type gpu struct {
		ns, pod, ctr string
		util         int
	}
	gs := make([]gpu, 8)
	i := 0
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		for range PodGPUs(&p) {
			if i < len(gs) {
				gs[i] = gpu{p.Namespace, p.Name, p.Spec.Containers[0].Name, e.util.get(p.Namespace + "/" + p.Name)}
				i++
			}
		}
	}
	var b bytes.Buffer
	family := func(name, help string, value func(int, gpu) string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for i, g := range gs {
			fmt.Fprintf(&b, `%s{gpu="%d",UUID="GPU-%08x-0000-4000-8000-%012x",device="nvidia%d",modelName="NVIDIA A100-SXM4-80GB",Hostname="dcgm-exporter-%s",DCGM_FI_DRIVER_VERSION="550.127.05",container="%s",namespace="%s",pod="%s"} %s`+"\n",
				name, i, len(e.node), i, i, e.node, g.ctr, g.ns, g.pod, value(i, g))
		}
	}
	family("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", func(int, gpu) string { return "1410" })
	family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", func(_ int, g gpu) string { return fmt.Sprint(g.util) })
	family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", func(_ int, g gpu) string { return fmt.Sprint(g.util * 600) })
	family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", func(_ int, g gpu) string { return fmt.Sprintf("%.6f", float64(g.util)/100) })
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// lockedBuffer collects a logger's lines across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (w teeWriter) Write(p []byte) (int, error) { _, _ = w.a.Write(p); return w.b.Write(p) }

// TestClusterDCGM: two A100 nodes and a V100 node, each with a
// dcgm-exporter pod (the chart's label, on its node; KWOK runs it and
// gives it an address); the V100 node's exporter answers 503. Two
// gpufleet pods run on the A100s, one idle (0 %) and one busy (93 %).
// The idle one gets the ladder's GPUIdle event and the alert metrics;
// the busy one never does; the busy GPU-seconds are the busy pod's
// share; the failing exporter is counted at each scrape, logged once,
// and the loop goes on.
func TestClusterDCGM(t *testing.T) {
	c := kubetest.Start(t)
	c.AddNodes(t, "gpu", 2, map[string]string{LabelGPUProduct: a100}, gpus(8))
	c.AddNodes(t, "old", 1, map[string]string{LabelGPUProduct: v100}, gpus(4))
	namespace(t, c, "research")
	namespace(t, c, "gpu-operator")

	// One exporter per node, each on a loopback server of its own; the
	// scrape's client dials it for the exporter pod's address.
	util := &utilTable{m: map[string]int{"research/idle": 0, "research/busy": 93}}
	exps := map[string]*fakeExporter{}
	dial := map[string]string{} // POD_IP:9400 → the node's server
	var dialMu sync.Mutex
	for _, node := range []string{"gpu-0", "gpu-1", "old-0"} {
		e := &fakeExporter{c: c, node: node, status: http.StatusOK, util: util}
		if node == "old-0" {
			e.status = http.StatusServiceUnavailable
		}
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		exps[node] = e
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: "nvidia-dcgm-exporter-" + node,
			Labels: map[string]string{"app.kubernetes.io/name": "dcgm-exporter"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "nvidia-dcgm-exporter", Image: "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.0-4.5.0-ubuntu22.04",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9400}}}}}}
		create(t, c, p)
		var ip string
		eventually(t, 30*time.Second, "exporter pod on "+node+" running with an IP", func() (bool, string) {
			got := getPod(t, c, "gpu-operator", p.Name)
			if got == nil {
				return false, "not found"
			}
			ip = got.Status.PodIP
			return got.Status.Phase == corev1.PodRunning && ip != "", fmt.Sprintf("phase %s, ip %q", got.Status.Phase, ip)
		})
		dialMu.Lock()
		dial[net.JoinHostPort(ip, "9400")] = srv.Listener.Addr().String()
		dialMu.Unlock()
	}
	var d net.Dialer
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialMu.Lock()
		to, ok := dial[addr]
		dialMu.Unlock()
		if !ok {
			return nil, fmt.Errorf("test: no exporter at %s", addr)
		}
		return d.DialContext(ctx, network, to)
	}}}

	var logs lockedBuffer
	s, err := New(Config{Client: c.Client,
		// The ladder's rungs in seconds: under 20 % over a 2 s window
		// for 2 s is an alert; the next rungs are an hour away.
		Engine: engine.Config{Fleet: fleet.Config{IdleFor: 2 * time.Second, NotifyAfter: time.Hour, ActAfter: time.Hour}},
		Tick:   250 * time.Millisecond,
		Log:    slog.New(slog.NewTextHandler(teeWriter{&logs, testWriter{t}}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		DCGM:   &DCGM{Interval: 250 * time.Millisecond, Timeout: time.Second, Client: client}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	start := time.Now()

	for _, name := range []string{"idle", "busy"} {
		create(t, c, gpuPod("research", name, 1).models(a100).Pod)
	}
	val := func(name string, labels map[string]string) float64 {
		v, _ := gauge(t, reg, name, labels)
		return v
	}
	idleEvent := func(pod string) *corev1.Event {
		for _, e := range events(t, c, "research", pod) {
			if e.Reason == EventGPUIdle {
				return &e
			}
		}
		return nil
	}
	eventually(t, 45*time.Second, "GPUIdle event on research/idle", func() (bool, string) {
		return idleEvent("idle") != nil, fmt.Sprintf("idle util %v, busy util %v, alerts %v",
			val("gpufleet_kube_pod_gpu_utilization_percent", map[string]string{"pod": "idle"}),
			val("gpufleet_kube_pod_gpu_utilization_percent", map[string]string{"pod": "busy"}),
			val("gpufleet_kube_idle_alerts_total", map[string]string{"kind": "idle-alert"}))
	})
	ev := idleEvent("idle")
	t.Logf("event on research/idle after %s: %s %s: %s", time.Since(start).Round(time.Millisecond), ev.Type, ev.Reason, ev.Message)
	if ev.Type != corev1.EventTypeWarning || !strings.HasPrefix(ev.Message, "gpufleet: GPU ") || !strings.Contains(ev.Message, "under 20% utilization") ||
		!strings.Contains(ev.Message, "unit research/idle") || ev.InvolvedObject.Kind != "Pod" {
		t.Errorf("event %s %q on %v; want a Warning from the ladder naming the GPU, the threshold and the unit", ev.Type, ev.Message, ev.InvolvedObject)
	}
	// The busy pod has had its samples as long: it never trips.
	time.Sleep(3 * time.Second)
	if e := idleEvent("busy"); e != nil {
		t.Errorf("busy pod (93%%) got %s: %s", e.Reason, e.Message)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpufleet_kube_idle_alerts_total", map[string]string{"kind": "idle-alert"}, 1},
		{"gpufleet_kube_idle_alerts_open", map[string]string{"kind": "idle-alert"}, 1},
		{"gpufleet_kube_idle_alerts_total", map[string]string{"kind": "idle-notify"}, 0},
		{"gpufleet_kube_pod_gpu_utilization_percent", map[string]string{"namespace": "research", "pod": "idle"}, 0},
		{"gpufleet_kube_pod_gpu_utilization_percent", map[string]string{"namespace": "research", "pod": "busy"}, 93},
		{"gpufleet_kube_pod_gpu_memory_used_mib", map[string]string{"namespace": "research", "pod": "busy"}, 93 * 600},
		{"gpufleet_kube_dcgm_exporters", nil, 3},
	} {
		if got := val(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// Busy GPU-seconds: the busy pod's 93 % of its time, the idle one's
	// nothing, over about the same measured time: near 0.465 of it.
	measured := val("gpufleet_kube_gpu_measured_seconds_total", map[string]string{"team": "research", "model": a100})
	busy := val("gpufleet_kube_gpu_busy_seconds_total", map[string]string{"team": "research", "model": a100})
	t.Logf("research on A100: %.2f GPU-seconds measured, %.2f busy", measured, busy)
	if measured < 6 || busy/measured < 0.40 || busy/measured > 0.53 {
		t.Errorf("measured %.2f GPU-s, busy %.2f: want at least 6 measured (2 pods, over 3 s each) and busy near 0.465 of it", measured, busy)
	}
	// The V100 node's exporter fails at every scrape: counted each time,
	// logged once (the test runs under a minute), and not fatal.
	failed := val("gpufleet_kube_dcgm_scrapes_total", map[string]string{"result": "failed"})
	ok := val("gpufleet_kube_dcgm_scrapes_total", map[string]string{"result": "ok"})
	exps["old-0"].mu.Lock()
	hits := exps["old-0"].hits
	exps["old-0"].mu.Unlock()
	if failed < 5 || ok < 2*failed-2 || float64(hits) < failed {
		t.Errorf("scrapes: %v failed, %v ok, the failing exporter hit %d times; want ≥ 5 failed, the two others ok each time", failed, ok, hits)
	}
	if n := strings.Count(logs.String(), "dcgm-exporter scrape failed"); n != 1 || !strings.Contains(logs.String(), "503 Service Unavailable") {
		t.Errorf("the failing exporter was logged %d times (want once a minute, so once) or without its 503:\n%s", n, logs.String())
	}
	if since := time.Since(start); since >= time.Minute {
		t.Fatalf("the test ran %s: the once-a-minute check needs it under a minute", since)
	}
	// Busy at 5 % from now on: the busy pod trips too, the loop still
	// steps, and the idle one's alert stays open.
	steps := s.Steps()
	util.set("research/busy", 5)
	eventually(t, 30*time.Second, "GPUIdle on research/busy once it idles", func() (bool, string) {
		return idleEvent("busy") != nil, fmt.Sprintf("alerts %v", val("gpufleet_kube_idle_alerts_total", map[string]string{"kind": "idle-alert"}))
	})
	if s.Steps() <= steps || val("gpufleet_kube_idle_alerts_open", map[string]string{"kind": "idle-alert"}) != 2 {
		t.Errorf("steps %d → %d, open alerts %v; want steps going on and 2 open", steps, s.Steps(), val("gpufleet_kube_idle_alerts_open", map[string]string{"kind": "idle-alert"}))
	}
}
