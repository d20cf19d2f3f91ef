package kube

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Collector returns the Prometheus collector of Kubernetes mode, read
// from the informers' caches at each scrape (nothing is counted on the
// side, so a figure is what the cluster shows):
//
//	gpufleet_kube_pods{tier,state}          gpufleet's pods: waiting (unbound) or bound (placed, not ended)
//	gpufleet_kube_oldest_wait_seconds{tier}  how long the oldest waiting pod of the tier has waited
//	gpufleet_kube_gpus{model,state}         GPUs of the schedulable GPU nodes: allocatable, and
//	                                        allocated to bound pods (any scheduler's)
//	gpufleet_kube_steps_total               the loop's steps
//
// A scrape during a step does not wait for it: the step count is then
// the one last read.
func (s *Scheduler) Collector() prometheus.Collector {
	return &collector{s: s,
		pods:   prometheus.NewDesc("gpufleet_kube_pods", "gpufleet's GPU pods by tier and state: waiting (not yet bound) or bound (placed on a node, not ended).", []string{"tier", "state"}, nil),
		oldest: prometheus.NewDesc("gpufleet_kube_oldest_wait_seconds", "How long the oldest waiting gpufleet pod of the tier has waited since its creation (0: none waits).", []string{"tier"}, nil),
		gpus:   prometheus.NewDesc("gpufleet_kube_gpus", "GPUs of the schedulable GPU nodes by model: allocatable, and allocated to the bound pods of any scheduler.", []string{"model", "state"}, nil),
		steps:  prometheus.NewDesc("gpufleet_kube_steps_total", "Steps of gpufleet's Kubernetes loop.", nil, nil),
	}
}

type collector struct {
	s                         *Scheduler
	pods, oldest, gpus, steps *prometheus.Desc
	lastSteps                 atomic.Int64
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pods
	ch <- c.oldest
	ch <- c.gpus
	ch <- c.steps
	c.s.tele.describe(ch)
}

var tiers = []string{"core", "regular", "offline"}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	now := s.cfg.Clock.Now()
	if s.mu.TryLock() {
		c.lastSteps.Store(int64(s.steps))
		s.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(c.steps, prometheus.CounterValue, float64(c.lastSteps.Load()))
	s.tele.collect(ch)

	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.gpus, err)
		return
	}
	pods, err := s.pods.List(labels.Everything())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pods, err)
		return
	}
	type gpuCount struct{ allocatable, allocated int64 }
	byModel := map[string]*gpuCount{}
	modelOf := map[string]string{} // schedulable GPU node → model
	for _, n := range nodes {
		if _, _, ok := NodeMachine(n, s.cfg.Options.Catalog); !ok {
			continue
		}
		q := n.Status.Allocatable[ResourceGPU]
		m := n.Labels[LabelGPUProduct]
		modelOf[n.Name] = m
		if byModel[m] == nil {
			byModel[m] = &gpuCount{}
		}
		byModel[m].allocatable += q.Value()
	}
	waiting, bound, oldest := map[string]int{}, map[string]int{}, map[string]time.Duration{}
	name := s.cfg.Options.schedulerName()
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if m, ok := modelOf[p.Spec.NodeName]; ok && p.Spec.NodeName != "" {
			byModel[m].allocated += int64(PodGPUs(p))
		}
		if p.Spec.SchedulerName != name || p.DeletionTimestamp != nil {
			continue
		}
		tier := "regular"
		if spec, err := PodSpec(p, s.cfg.Options); err == nil {
			tier = string(spec.Tier)
		}
		if p.Spec.NodeName != "" {
			bound[tier]++
			continue
		}
		waiting[tier]++
		oldest[tier] = max(oldest[tier], now.Sub(p.CreationTimestamp.Time))
	}
	for _, t := range tiers {
		ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(waiting[t]), t, "waiting")
		ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(bound[t]), t, "bound")
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest[t].Seconds(), t)
	}
	for m, g := range byModel {
		ch <- prometheus.MustNewConstMetric(c.gpus, prometheus.GaugeValue, float64(g.allocatable), m, "allocatable")
		ch <- prometheus.MustNewConstMetric(c.gpus, prometheus.GaugeValue, float64(g.allocated), m, "allocated")
	}
}
