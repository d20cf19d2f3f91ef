package server

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/billing"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the loop's Prometheus series, set every tick. The alert
// rules and the dashboard in deploy/ read them by name; a test keeps the
// two in step (deploy_test.go).
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
	leader    prometheus.Gauge
	agents    *prometheus.GaugeVec
	budget    *prometheus.GaugeVec
	spent     *prometheus.GaugeVec
	booting   prometheus.Gauge
	boundary  *prometheus.GaugeVec
}

// boundaryBuckets are the labels of gpufleet_fleet_leases_to_boundary:
// how far a live lease's next billing boundary is. A machine near its
// boundary is the one the fleet keeps or releases next.
var boundaryBuckets = []struct {
	label string
	upTo  time.Duration // 0: beyond the last bucket
}{{"5m", 5 * time.Minute}, {"15m", 15 * time.Minute}, {"1h", time.Hour}, {"1d", 24 * time.Hour}, {"later", 0}}

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
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_loop_leader",
			Help: "1 while this replica holds the leadership lock and runs the control loop, else 0."}),
		agents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpufleet_agents",
			Help: "Registered node agents by what the server believes of them (ok, suspect, down)."}, []string{"state"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpufleet_team_budget",
			Help: "Each team's monthly budget in currency units (teams without a budget are not listed)."}, []string{"team"}),
		spent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpufleet_team_spent",
			Help: "What each team with a monthly budget has spent this month, in currency units."}, []string{"team"}),
		booting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpufleet_lease_oldest_boot_seconds",
			Help: "How long the oldest provisioning lease has been booting since the provider launched it (0: none boots)."}),
		boundary: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpufleet_fleet_leases_to_boundary",
			Help: "Live launched leases by how soon their next billing boundary comes (within 5m, 15m, 1h, 1d, or later)."}, []string{"within"}),
	}
}

// Collectors returns the loop's metrics, for the API's /metrics.
func (l *Loop) Collectors() []prometheus.Collector {
	m := l.metrics
	return []prometheus.Collector{m.tick, m.queue, m.leases, m.gpusPaid, m.gpusAlloc, m.idleGPUs, m.idleRate, m.failures, m.lastOK,
		m.leader, m.agents, m.budget, m.spent, m.booting, m.boundary}
}

// observe sets the gauges from st and the agents at now, after a tick
// that took d. Every series with a fixed label set is written even when
// zero, so that an alert on it sees 0 rather than no data.
func (m *metrics) observe(st *engine.State, agents []store.Agent, now time.Time, d time.Duration) {
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
	for _, b := range boundaryBuckets {
		m.boundary.WithLabelValues(b.label).Set(0)
	}
	var paid, idle core.Milli // a quarter-GPU slice is 0.25 GPUs
	var oldestBoot time.Duration
	for _, le := range st.Leases {
		if le.State.Final() {
			continue
		}
		m.leases.WithLabelValues(string(le.Mode)).Inc()
		paid += le.Offer.CapMilli()
		if le.State == core.LeaseProvisioning && !le.Start.IsZero() {
			oldestBoot = max(oldestBoot, now.Sub(le.Start))
		}
		if le.Plan != nil && !le.Start.IsZero() {
			if until, err := billing.PaidUntil(le.Plan, le.Start, now); err == nil {
				m.boundary.WithLabelValues(boundaryBucket(until.Sub(now))).Inc()
			}
		}
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
	m.booting.Set(oldestBoot.Seconds())

	for _, s := range []store.AgentState{store.AgentOK, store.AgentSuspect, store.AgentDown} {
		m.agents.WithLabelValues(string(s)).Set(0)
	}
	for _, a := range agents {
		m.agents.WithLabelValues(string(a.State)).Inc()
	}

	m.budget.Reset()
	m.spent.Reset()
	for _, t := range st.Teams {
		if t.MonthlyBudget <= 0 {
			continue
		}
		m.budget.WithLabelValues(t.ID).Set(float64(t.MonthlyBudget) / float64(core.MicrosPerUnit))
		m.spent.WithLabelValues(t.ID).Set(float64(st.Spent[t.ID]) / float64(core.MicrosPerUnit))
	}
}

// boundaryBucket is the gpufleet_fleet_leases_to_boundary label for a
// boundary left away.
func boundaryBucket(left time.Duration) string {
	for _, b := range boundaryBuckets {
		if b.upTo > 0 && left <= b.upTo {
			return b.label
		}
	}
	return boundaryBuckets[len(boundaryBuckets)-1].label
}
