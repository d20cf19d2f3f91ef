package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/fleet"
)

// readingsWindow is how old a GPU's latest sample may be and still count
// as what the GPU does now (the server's agent readings use the same).
const readingsWindow = time.Minute

// telemetry is what the DCGM scrape keeps between steps: the exporters'
// latest samples, the idle ladder's state (Build makes the engine's
// state afresh each step, so the ladder is carried here, as the
// fair-share history is), and the counts its metrics show.
type telemetry struct {
	d DCGM

	mu sync.Mutex
	// latest are the samples of each exporter pod's last good scrape.
	latest    map[string][]PodGPU
	exporters int
	// logged is when each failing exporter's failure was last logged.
	logged         map[string]time.Time
	scrapes        [2]int64 // ok, failed
	ladder         map[string]fleet.LadderState
	fed            []fedGPU
	fired          map[string]int64
	open           map[string]map[string]bool // kind → lease/gpu|unit
	lastAt         map[string]time.Time       // when each fed GPU was last counted
	measured, busy map[[2]string]float64      // team, model → GPU-seconds
}

// fedGPU is a sample the step fed to the ladder, with whose it is.
type fedGPU struct {
	PodGPU
	pod         PodRef
	unit, team  string
	model, gkey string
}

func newTelemetry(d *DCGM) *telemetry {
	if d == nil {
		return nil
	}
	return &telemetry{d: d.withDefaults(), latest: map[string][]PodGPU{}, logged: map[string]time.Time{},
		fired: map[string]int64{}, open: map[string]map[string]bool{}, lastAt: map[string]time.Time{},
		measured: map[[2]string]float64{}, busy: map[[2]string]float64{}}
}

// scrapeLoop scrapes the exporters every Interval until ctx ends. It
// runs beside the steps and never holds them up: a step reads the
// latest samples there are.
func (s *Scheduler) scrapeLoop(ctx context.Context) {
	for {
		s.scrapeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.tele.d.Interval):
		}
	}
}

// scrapeOnce scrapes every exporter pod the informer shows once. A
// failure is counted (gpufleet_kube_dcgm_scrapes_total{result="failed"})
// and logged once a minute per exporter; that exporter's GPUs keep their
// last samples until they are older than a minute, then feed nothing.
func (s *Scheduler) scrapeOnce(ctx context.Context) {
	t := s.tele
	pods, err := s.pods.List(t.d.Selector)
	if err != nil {
		s.cfg.Log.Warn("listing dcgm-exporter pods failed", "err", err)
		return
	}
	exp := exporters(pods, t.d.Selector)
	node := map[string]string{}
	for _, p := range exp {
		node[p.Namespace+"/"+p.Name] = p.Spec.NodeName
	}
	ok, failed := scrapeAll(ctx, t.d, exp, s.cfg.Clock.Now())
	if ctx.Err() != nil {
		return
	}
	now := s.cfg.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.exporters = len(exp)
	for k := range t.latest {
		if _, there := node[k]; !there {
			delete(t.latest, k)
		}
	}
	for k, gs := range ok {
		t.latest[k] = gs
		delete(t.logged, k)
	}
	t.scrapes[0] += int64(len(ok))
	t.scrapes[1] += int64(len(failed))
	for _, k := range slices.Sorted(maps.Keys(failed)) {
		if at, ok := t.logged[k]; ok && now.Sub(at) < time.Minute {
			continue
		}
		t.logged[k] = now
		s.cfg.Log.Warn("dcgm-exporter scrape failed; retried every interval, logged once a minute", "exporter", k, "node", node[k], "err", failed[k])
	}
	for k := range t.logged {
		if _, there := node[k]; !there {
			delete(t.logged, k)
		}
	}
}

// telemetryBefore gives the step's engine state the ladder's state and
// the readings of gpufleet's running pods: for each GPU an exporter on
// the pod's node attributes to it, its latest utilization (not older
// than a minute, nor from before the pod started), as the server feeds
// the agents' samples (fleet.GPUReading, keyed by node, the exporter's
// GPU index and the pod's unit). It counts each fed GPU's time since the
// last step as measured, and that time × its utilization as busy (the
// audit's busy GPU-hours, allocated time × measured utilization).
func (s *Scheduler) telemetryBefore(w *World, now time.Time) {
	t := s.tele
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w.State.Ladder = t.ladder
	type held struct {
		u    *engine.Unit
		node string
		ref  PodRef
	}
	running := map[string]*engine.Unit{}
	for _, u := range w.State.Units {
		if u.State == core.JobRunning {
			running[u.Key()] = u
		}
	}
	pods := map[string]held{}
	for key, g := range w.groups {
		u := running[key]
		if u == nil {
			continue
		}
		for _, p := range g.pods {
			if p.Spec.NodeName != "" {
				pods[p.Namespace+"/"+p.Name] = held{u, p.Spec.NodeName, refOf(p)}
			}
		}
	}
	model := map[string]string{}
	for _, l := range w.State.Leases {
		model[l.ID] = l.Offer.GPUModel
	}
	t.fed = t.fed[:0]
	seen := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(t.latest)) {
		for _, g := range t.latest[k] {
			h, ok := pods[g.Key()]
			if !ok || h.node != g.Node || g.UtilPct < 0 || now.Sub(g.At) > readingsWindow || g.At.Before(h.u.Start) {
				continue
			}
			unit := h.u.Key()
			w.State.Readings = append(w.State.Readings, fleet.GPUReading{LeaseID: g.Node, GPU: g.GPU, Unit: unit, Team: h.u.Job.Team, UtilPct: g.UtilPct, At: g.At})
			f := fedGPU{PodGPU: g, pod: h.ref, unit: unit, team: h.u.Job.Team, model: model[g.Node], gkey: fleet.GPUKey(g.Node, g.GPU, unit) + "|" + g.MIG}
			t.fed = append(t.fed, f)
			seen[f.gkey] = true
			if last, ok := t.lastAt[f.gkey]; ok && now.After(last) && now.Sub(last) <= readingsWindow {
				sec := now.Sub(last).Seconds()
				tm := [2]string{f.team, f.model}
				t.measured[tm] += sec
				t.busy[tm] += sec * float64(g.UtilPct) / 100
			}
			t.lastAt[f.gkey] = now
		}
	}
	for k := range t.lastAt {
		if !seen[k] {
			delete(t.lastAt, k)
		}
	}
}

// Events on a pod for the idle ladder's rungs.
const (
	EventGPUIdle       = "GPUIdle"       // idle-alert
	EventGPUIdleNotify = "GPUIdleNotify" // idle-notify
	EventGPUIdleAction = "GPUIdleAction" // idle-action: recorded, not acted on
)

// telemetryDecided keeps the step's ladder for the next and turns its
// rungs into events on the pods whose GPUs they are about, before the
// decisions are applied. Kubernetes mode does not act on the last rung
// (the policy's idle action): its Action is cleared, so the engine's
// Apply stops nothing, and the event says what the policy would do.
func (s *Scheduler) telemetryDecided(ctx context.Context, d *engine.Decisions) {
	t := s.tele
	if t == nil {
		return
	}
	t.mu.Lock()
	t.ladder = d.Ladder
	podOf := map[string]PodRef{}
	for _, f := range t.fed {
		podOf[fleet.GPUKey(f.Node, f.GPU, f.unit)] = f.pod
	}
	type ev struct {
		pod          PodRef
		reason, text string
	}
	var evs []ev
	for i := range d.Alerts {
		a := &d.Alerts[i]
		var reason string
		switch a.Kind {
		case "idle-alert":
			reason = EventGPUIdle
		case "idle-notify":
			reason = EventGPUIdleNotify
		case "idle-action":
			reason = EventGPUIdleAction
		default:
			continue
		}
		k := fleet.GPUKey(a.LeaseID, a.GPU, a.Unit)
		t.fired[a.Kind]++
		if t.open[a.Kind] == nil {
			t.open[a.Kind] = map[string]bool{}
		}
		t.open[a.Kind][k] = true
		text := ReasonText(a.Reason)
		if a.Kind == "idle-action" {
			text += fmt.Sprintf(" (Kubernetes mode records it and does not act: policy action %q)", a.Action)
			a.Action = ""
		}
		if p, ok := podOf[k]; ok {
			evs = append(evs, ev{p, reason, text})
		}
	}
	for _, c := range d.Cleared {
		delete(t.open[c.Kind], fleet.GPUKey(c.LeaseID, c.GPU, c.Unit))
	}
	t.mu.Unlock()
	for _, e := range evs {
		s.cfg.Log.Info("idle GPU", "pod", e.pod.String(), "event", e.reason, "reason", e.text)
		s.event(ctx, e.pod, corev1.EventTypeWarning, e.reason, e.text)
	}
}

var (
	descExporters = prometheus.NewDesc("gpufleet_kube_dcgm_exporters", "dcgm-exporter pods found (selected, running, with an address) at the last scrape.", nil, nil)
	descScrapes   = prometheus.NewDesc("gpufleet_kube_dcgm_scrapes_total", "Scrapes of dcgm-exporter pods by result: ok or failed (unreachable, not 200, or not the exposition format).", []string{"result"}, nil)
	descPodUtil   = prometheus.NewDesc("gpufleet_kube_pod_gpu_utilization_percent", "Utilization of each GPU of gpufleet's running pods, as the last step read it from dcgm-exporter.", []string{"namespace", "pod", "node", "gpu"}, nil)
	descPodMem    = prometheus.NewDesc("gpufleet_kube_pod_gpu_memory_used_mib", "Framebuffer memory used on each GPU of gpufleet's running pods (MiB), as the last step read it.", []string{"namespace", "pod", "node", "gpu"}, nil)
	descFired     = prometheus.NewDesc("gpufleet_kube_idle_alerts_total", "Rungs of the idle ladder fired on gpufleet's pods, by kind (idle-alert, idle-notify, idle-action).", []string{"kind"}, nil)
	descOpen      = prometheus.NewDesc("gpufleet_kube_idle_alerts_open", "GPUs of gpufleet's pods on an idle rung now, by kind.", []string{"kind"}, nil)
	descMeasured  = prometheus.NewDesc("gpufleet_kube_gpu_measured_seconds_total", "GPU-seconds of gpufleet's running pods with a dcgm-exporter sample, by team and GPU model.", []string{"team", "model"}, nil)
	descBusy      = prometheus.NewDesc("gpufleet_kube_gpu_busy_seconds_total", "Busy GPU-seconds of gpufleet's running pods (measured time × utilization), by team and GPU model.", []string{"team", "model"}, nil)
	ladderKinds   = []string{"idle-alert", "idle-notify", "idle-action"}
)

func (t *telemetry) describe(ch chan<- *prometheus.Desc) {
	if t == nil {
		return
	}
	for _, d := range []*prometheus.Desc{descExporters, descScrapes, descPodUtil, descPodMem, descFired, descOpen, descMeasured, descBusy} {
		ch <- d
	}
}

func (t *telemetry) collect(ch chan<- prometheus.Metric) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descExporters, prometheus.GaugeValue, float64(t.exporters))
	ch <- prometheus.MustNewConstMetric(descScrapes, prometheus.CounterValue, float64(t.scrapes[0]), "ok")
	ch <- prometheus.MustNewConstMetric(descScrapes, prometheus.CounterValue, float64(t.scrapes[1]), "failed")
	seen := map[[4]string]bool{}
	for _, f := range t.fed {
		gpu := strconv.Itoa(f.GPU)
		if f.MIG != "" {
			gpu += "/" + f.MIG
		}
		k := [4]string{f.pod.Namespace, f.pod.Name, f.Node, gpu}
		if seen[k] {
			continue
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(descPodUtil, prometheus.GaugeValue, float64(f.UtilPct), k[:]...)
		if f.MemUsedMiB >= 0 {
			ch <- prometheus.MustNewConstMetric(descPodMem, prometheus.GaugeValue, float64(f.MemUsedMiB), k[:]...)
		}
	}
	for _, k := range ladderKinds {
		ch <- prometheus.MustNewConstMetric(descFired, prometheus.CounterValue, float64(t.fired[k]), k)
		ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(len(t.open[k])), k)
	}
	for tm, v := range t.measured {
		ch <- prometheus.MustNewConstMetric(descMeasured, prometheus.CounterValue, v, tm[0], tm[1])
		ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, t.busy[tm], tm[0], tm[1])
	}
}
