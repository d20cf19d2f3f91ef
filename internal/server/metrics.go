package server

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the loop's Prometheus series, set every tick.
type metrics struct {
	tick      prometheus.Histogram
	queue     *prometheus.GaugeVec
	leases    *prometheus.GaugeVec
	gpusPaid  prometheus.Gauge
	gpusAlloc prometheus.Gauge
	idleGPUs  prometheus.Gauge
	idleRate  *prometheus.GaugeVec
	failures  prometheus.Counter
	lastOK    prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpufleet_loop_tick_seconds",
			Help: "Control loop tick latency: load, decide, persist and act.", Buckets: prometheus.DefBuckets}),
		queue:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpufleet_queue_depth", Help: "Pending units by tier."}, []string{"tier"}),
		leases:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpufleet_fleet_leases", Help: "Live leases by billing mode."}, []string{"mode"}),
		gpusPaid:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_gpus_paid", Help: "GPUs on live leases (paid for)."}),
		gpusAlloc: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_gpus_allocated_milli", Help: "Milli-GPUs allocated to running units."}),
		idleGPUs:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_gpus_idle_leases", Help: "GPUs on ready leases that run nothing (idle spend)."}),
		idleRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpufleet_idle_spend_per_hour",
			Help: "What the ready leases that run nothing cost per hour at their plans' base prices (time-of-use multipliers not applied), by currency: idle spend as it accrues."}, []string{"currency"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpufleet_loop_failures_total",
			Help: "Control loop attempts that failed (a reconcile or a tick, or taking the leadership lock); the loop retries at the next tick."}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_loop_last_success_timestamp_seconds",
			Help: "When the control loop last completed a tick (Unix seconds; 0 before the first)."}),
	}
}

// Collectors returns the loop's metrics, for the API's /metrics.
func (l *Loop) Collectors() []prometheus.Collector {
	m := l.metrics
	return []prometheus.Collector{m.tick, m.queue, m.leases, m.gpusPaid, m.gpusAlloc, m.idleGPUs, m.idleRate, m.failures, m.lastOK}
}

// observe sets the gauges from st after a tick that took d.
func (m *metrics) observe(st *engine.State, d time.Duration) {
	m.tick.Observe(d.Seconds())
	for _, t := range []core.Tier{core.TierCore, core.TierRegular, core.TierOffline} {
		m.queue.WithLabelValues(string(t)).Set(0)
	}
	var alloc int64
	busy := map[string]bool{}
	for _, u := range st.Units {
		switch u.State {
		case core.JobPending, core.JobPreempted:
			m.queue.WithLabelValues(string(u.Job.Tier)).Inc()
		case core.JobRunning, core.JobCheckpointing:
			alloc += int64(u.Job.Request.GPUs) * int64(u.Job.Request.MilliPerGPU)
			for _, p := range u.Parts {
				busy[p.LeaseID] = true
			}
		}
	}
	m.leases.Reset()
	m.idleRate.Reset()
	var paid, idle core.Milli // a quarter-GPU slice is 0.25 GPUs
	for _, le := range st.Leases {
		if le.State.Final() {
			continue
		}
		m.leases.WithLabelValues(string(le.Mode)).Inc()
		paid += le.Offer.CapMilli()
		if le.State == core.LeaseReady && !busy[le.ID] {
			idle += le.Offer.CapMilli()
			if le.Plan != nil && le.Plan.Per.Seconds() > 0 {
				perHour := float64(le.Plan.Price) / 1e6 * 3600 / float64(le.Plan.Per.Seconds())
				m.idleRate.WithLabelValues(string(le.Offer.Currency)).Add(perHour)
			}
		}
	}
	m.gpusPaid.Set(float64(paid) / float64(core.WholeGPU))
	m.gpusAlloc.Set(float64(alloc))
	m.idleGPUs.Set(float64(idle) / float64(core.WholeGPU))
}
