package report

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sim"
)

// Number renders micros or milli-values exactly as a JSON number.
func Number(v int64, scale int64) json.Number {
	return json.Number(core.Micros(core.MulDivHalfEven(v, int64(core.MicrosPerUnit), scale)).Decimal())
}

// PolicyView is the JSON of one policy's result.
type PolicyView struct {
	Policy string `json:"policy"`
	// PolicySource is "preset NAME" or the policy file's path, and
	// PolicyHash the digest of its knobs: which policy ran, exactly.
	PolicySource string `json:"policy_source,omitempty"`
	PolicyHash   string `json:"policy_hash,omitempty"`
	// Label names the policy on one line (sim.Result.PolicyLabel).
	Label             string                 `json:"-"`
	Cost              json.Number            `json:"cost"`
	CostByMode        map[string]json.Number `json:"cost_by_mode"`
	IdleCost          json.Number            `json:"idle_cost"`
	PaidGPUHours      json.Number            `json:"paid_gpu_hours"`
	AllocatedGPUHours json.Number            `json:"allocated_gpu_hours"`
	// BusyGPUHours, with utilization series (sim --util): allocated
	// GPU-hours weighted by the jobs' utilization, jobs without a series
	// (UtilMissingJobs) counted busy; IdleAlerts the idle ladder's alerts
	// by kind.
	BusyGPUHours    json.Number    `json:"busy_gpu_hours,omitempty"`
	UtilMissingJobs int            `json:"util_missing_jobs,omitempty"`
	IdleAlerts      map[string]int `json:"idle_alerts,omitempty"`
	IdleShare       json.Number    `json:"idle_share"`
	// IdleShareArriving is the idle share up to the trace's last
	// submission (sim.Result.LastSubmit).
	IdleShareArriving json.Number          `json:"idle_share_arriving"`
	WaitP50           int64                `json:"wait_p50_s"`
	WaitP95           int64                `json:"wait_p95_s"`
	WaitP99           int64                `json:"wait_p99_s"`
	WaitsByTier       map[string]sim.Waits `json:"waits_by_tier"`
	DeadlineMisses    int                  `json:"deadline_misses"`
	Preemptions       int                  `json:"preemptions"`
	Moves             int                  `json:"moves"`
	Reclaims          int                  `json:"reclaims"`
	LostGPUHours      json.Number          `json:"lost_gpu_hours"`
	Leases            int                  `json:"leases"`
	Jobs              int                  `json:"jobs"`
	Unfinished        int                  `json:"unfinished"`
	Events            int                  `json:"events"`
	// Steps counts the engine steps the replay took.
	Steps int `json:"steps"`
	// WallS is the replay's wall-clock seconds and EventsPerS its events
	// per wall-clock second, where the caller measured them (machine
	// dependent, so not part of the result proper).
	WallS      float64 `json:"wall_s,omitempty"`
	EventsPerS float64 `json:"events_per_s,omitempty"`
	// VsBound is cost / lower bound.
	VsBound json.Number `json:"vs_lower_bound"`
}

// SimView is the JSON of a what-if comparison.
type SimView struct {
	Trace      string       `json:"trace"`
	Currency   string       `json:"currency"`
	Profile    string       `json:"profile,omitempty"`
	Seed       uint64       `json:"seed"`
	Policies   []PolicyView `json:"policies"`
	LowerBound struct {
		Cost   json.Number `json:"cost"`
		Method string      `json:"method"`
		// PriceBound is the simpler bound when Cost is another (the LP).
		PriceBound json.Number `json:"price_bound,omitempty"`
	} `json:"lower_bound"`
	Skipped map[string]int `json:"skipped,omitempty"`
	// WallS is the whole comparison's wall-clock seconds (replays and
	// bounds, which may overlap) and LPWallS the LP bound's, where the
	// caller measured them.
	WallS   float64 `json:"wall_s,omitempty"`
	LPWallS float64 `json:"lp_wall_s,omitempty"`
}

// NewSimView renders results against a lower bound.
func NewSimView(traceName string, cur core.Currency, seed uint64, profile string, results []*sim.Result, bound core.Micros, skipped map[string]int) SimView {
	v := SimView{Trace: traceName, Currency: string(cur), Seed: seed, Profile: profile, Skipped: skipped}
	v.LowerBound.Cost = Number(int64(bound), int64(core.MicrosPerUnit))
	v.LowerBound.Method = "price bound: every GPU-second of work at the cheapest admissible price per GPU-second, no idle time"
	for _, r := range results {
		pv := PolicyView{Policy: r.Policy, PolicySource: r.PolicySource, PolicyHash: r.PolicyHash, Label: label(r), Cost: Number(int64(r.Cost), int64(core.MicrosPerUnit)), CostByMode: map[string]json.Number{},
			IdleCost:     Number(int64(r.IdleCost), int64(core.MicrosPerUnit)),
			PaidGPUHours: Number(r.PaidMilliSec, 3_600_000), AllocatedGPUHours: Number(r.AllocatedMilliSec, 3_600_000),
			IdleShare: Number(r.IdleShareBP(), 10000), IdleShareArriving: Number(r.IdleShareArrivingBP(), 10000),
			WaitP50: r.Waits.P50, WaitP95: r.Waits.P95, WaitP99: r.Waits.P99, WaitsByTier: map[string]sim.Waits{},
			DeadlineMisses: r.DeadlineMisses, Preemptions: r.Preemptions, Moves: r.Moves, Reclaims: r.Reclaims,
			LostGPUHours: Number(r.LostMilliSec, 3_600_000), Leases: r.Leases, Jobs: r.Jobs, Unfinished: r.Unfinished, Events: r.Events, Steps: r.Steps}
		if r.BusyMilliSec > 0 || r.UtilMissingJobs > 0 {
			pv.BusyGPUHours, pv.UtilMissingJobs = Number(r.BusyMilliSec, 3_600_000), r.UtilMissingJobs
		}
		pv.IdleAlerts = r.IdleAlerts
		for m, c := range r.CostByMode {
			pv.CostByMode[string(m)] = Number(int64(c), int64(core.MicrosPerUnit))
		}
		for t, w := range r.WaitsByTier {
			pv.WaitsByTier[string(t)] = w
		}
		if bound > 0 {
			pv.VsBound = Number(core.MulDivHalfEven(int64(r.Cost), 10000, int64(bound)), 10000)
		}
		v.Policies = append(v.Policies, pv)
	}
	return v
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// modeKeys are the billing modes in the order the cost chart stacks them;
// a mode has the same color in every chart (modeColor).
var modeKeys = []string{"monthly", "weekly", "daily", "on-demand", "spot"}

func modeColor(m string) string {
	for i, k := range modeKeys {
		if k == m {
			return palette[i%len(palette)]
		}
	}
	return palette[len(palette)-1]
}

// WriteSimHTML writes a self-contained report: the policy table against
// the bound, the cost breakdown, fleet size by billing mode and paid vs
// allocated GPUs over time, and the waiting-time CDF per tier.
func WriteSimHTML(w io.Writer, v SimView, results []*sim.Result) error {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>gpufleet what-if</title><style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:14px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
pre{background:#f8f8f8;padding:1em;white-space:pre-wrap}@media print{body{margin:0}}</style></head><body>`)
	fmt.Fprintf(&b, "<h1>What-if: %s</h1><p>Seed %d. Lower bound: <b>%s %s</b> (%s).</p>", html.EscapeString(v.Trace), v.Seed, Fixed(v.LowerBound.Cost, 2), html.EscapeString(v.Currency), html.EscapeString(v.LowerBound.Method))
	b.WriteString("<table><tr><th>policy</th><th>cost</th><th>× bound</th><th>idle share</th><th>paid GPU-h</th><th>allocated GPU-h</th><th>wait p50 s</th><th>p95 s</th><th>p99 s</th><th>core p95 s</th><th>deadline misses</th><th>preemptions</th><th>lost GPU-h</th></tr>")
	for _, p := range v.Policies {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td></tr>",
			html.EscapeString(cmp.Or(p.Label, p.Policy)), Fixed(p.Cost, 2), Fixed(p.VsBound, 3), Percent(p.IdleShare), Fixed(p.PaidGPUHours, 0), Fixed(p.AllocatedGPUHours, 0),
			grouped(strconv.FormatInt(p.WaitP50, 10)), grouped(strconv.FormatInt(p.WaitP95, 10)), grouped(strconv.FormatInt(p.WaitP99, 10)),
			grouped(strconv.FormatInt(p.WaitsByTier["core"].P95, 10)), p.DeadlineMisses, grouped(strconv.Itoa(p.Preemptions)), Fixed(p.LostGPUHours, 1))
	}
	b.WriteString("</table>")
	// Cost breakdown.
	keys := modeKeys
	var rows []string
	var vals [][]float64
	for _, r := range results {
		rows = append(rows, label(r))
		var row []float64
		for _, k := range keys {
			row = append(row, r.CostByMode[core.BillingMode(k)].Float())
		}
		vals = append(vals, row)
	}
	b.WriteString(barChart("Cost by billing mode", rows, keys, palette, vals, v.Currency))
	idleRows := make([][]float64, len(results))
	for i, r := range results {
		idleRows[i] = []float64{(r.Cost - r.IdleCost).Float(), r.IdleCost.Float()}
	}
	b.WriteString(barChart("Useful vs idle spend", rows, []string{"used", "idle"}, []string{"#2ca02c", "#d62728"}, idleRows, v.Currency))
	for _, r := range results {
		if len(r.Series) == 0 {
			continue
		}
		samples := thin(r.Series, 800)
		t0 := samples[0].At
		hours := func(t time.Time) float64 { return t.Sub(t0).Hours() }
		var ms []string
		for _, m := range core.BillingModes {
			for i := range samples {
				if samples[i].GPUsIn(m) > 0 {
					ms = append(ms, string(m))
					break
				}
			}
		}
		var ss []series
		for _, m := range ms {
			sr := series{Name: m, Color: modeColor(m), Step: true}
			for _, s := range samples {
				sr.Points = append(sr.Points, [2]float64{hours(s.At), float64(s.GPUsIn(core.BillingMode(m)))})
			}
			ss = append(ss, sr)
		}
		fmt.Fprintf(&b, "<h2>%s</h2>", html.EscapeString(label(r)))
		b.WriteString(lineChart("Fleet GPUs by billing mode", "hours", "GPUs", ss))
		paid := series{Name: "paid GPUs", Color: "#1f77b4", Step: true}
		alloc := series{Name: "allocated GPUs", Color: "#2ca02c", Step: true}
		for _, s := range samples {
			total := 0
			for _, n := range s.GPUs {
				total += int(n)
			}
			paid.Points = append(paid.Points, [2]float64{hours(s.At), float64(total)})
			alloc.Points = append(alloc.Points, [2]float64{hours(s.At), float64(s.AllocatedMilli) / 1000})
		}
		b.WriteString(lineChart("Paid vs allocated GPUs", "hours", "GPUs", []series{paid, alloc}))
	}
	b.WriteString(waitCDFs(results))
	if v.Profile != "" {
		fmt.Fprintf(&b, "<h2>Workload profile</h2><pre>%s</pre>", html.EscapeString(v.Profile))
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Fixed renders an exact decimal for a table: rounded half away from
// zero to places decimals, thousands grouped. It works on the digits, so
// no float rounding shows; a value that is not a decimal is shown as is.
func Fixed(n json.Number, places int) string {
	s := string(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" || strings.Trim(intPart+frac, "0123456789") != "" {
		return string(n)
	}
	frac += strings.Repeat("0", places+1)
	digits := []byte(intPart + frac[:places])
	if frac[places] >= '5' {
		i := len(digits) - 1
		for ; i >= 0 && digits[i] == '9'; i-- {
			digits[i] = '0'
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		} else {
			digits[i]++
		}
	}
	out := string(digits[:len(digits)-places])
	if places > 0 {
		out += "." + string(digits[len(digits)-places:])
	}
	out = grouped(out)
	if neg && strings.Trim(out, "0.,") != "" {
		out = "-" + out
	}
	return out
}

// Percent renders a share (0.1177) as a percentage with one decimal
// (11.8%).
func Percent(n json.Number) string {
	f, err := n.Float64()
	if err != nil {
		return string(n)
	}
	return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
}

// thin keeps at most n samples, evenly spaced, always the last: enough
// for a chart, small enough for a page.
func thin(ss []sim.Sample, n int) []sim.Sample {
	if len(ss) <= n {
		return ss
	}
	out := make([]sim.Sample, 0, n+1)
	step := float64(len(ss)) / float64(n)
	for i := 0.0; int(i) < len(ss); i += step {
		out = append(out, ss[int(i)])
	}
	if last := ss[len(ss)-1]; !out[len(out)-1].At.Equal(last.At) {
		out = append(out, last)
	}
	return out
}

// WriteSimCSV writes each policy's time series: policy, hours since start,
// GPUs per mode, allocated GPUs, pending units.
func WriteSimCSV(w io.Writer, results []*sim.Result) error {
	cw := csv.NewWriter(w)
	modes := []core.BillingMode{core.OnDemand, core.Spot, core.Daily, core.Weekly, core.Monthly}
	header := []string{"policy", "at"}
	for _, m := range modes {
		header = append(header, "gpus_"+strings.ReplaceAll(string(m), "-", "_"))
	}
	header = append(header, "allocated_gpus", "pending_units")
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range results {
		for _, s := range r.Series {
			row := []string{label(r), s.At.UTC().Format(time.RFC3339)}
			for _, m := range modes {
				row = append(row, strconv.Itoa(s.GPUsIn(m)))
			}
			row = append(row, string(Number(s.AllocatedMilli, 1000)), strconv.Itoa(s.Pending))
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// PolicyLeases is every lease one policy's replay rented.
type PolicyLeases struct {
	Policy string
	Leases []sim.LeaseRecord
}

// WriteLeaseCSV writes each policy's leases, one row per lease in the
// order they were priced: what the policy rented, for how long, how much
// of it work used, and what each cost. The costs of a policy's rows sum
// to its cost exactly. mode is the last term's; terms lists every term
// as mode@start, oldest first (a committed machine renews on another
// term where the work on it pays for one).
func WriteLeaseCSV(w io.Writer, policies []PolicyLeases) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"policy", "lease", "offer", "mode", "gpus", "start", "end", "held_h", "billed_h", "allocated_gpu_h", "idle_share", "cost", "reclaimed", "terms"}); err != nil {
		return err
	}
	for _, p := range policies {
		for _, l := range p.Leases {
			terms := make([]string, len(l.Terms))
			for i, t := range l.Terms {
				terms[i] = string(t.Mode) + "@" + t.Start.UTC().Format(time.RFC3339)
			}
			row := []string{p.Policy, l.ID, l.Offer, string(l.Mode), strconv.Itoa(l.GPUs),
				l.Start.UTC().Format(time.RFC3339), l.End.UTC().Format(time.RFC3339),
				string(Number(int64(l.End.Sub(l.Start)/time.Second), 3600)), string(Number(int64(l.Billed/time.Second), 3600)),
				string(Number(l.AllocatedMilliSec, 3600*1000)), idleShare(l), l.Cost.Decimal(), strconv.FormatBool(l.Reclaimed), strings.Join(terms, " ")}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// PolicyEvents is one policy's events, in the order the replay made them.
type PolicyEvents struct {
	Policy string
	Events []core.Event
}

// WriteEventCSV writes each policy's events, one row per event: the
// decision log (acquire, place, preempt, move, release, …) with the
// reason each decision gives, to follow one job or lease through a
// replay.
func WriteEventCSV(w io.Writer, policies []PolicyEvents) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"policy", "at", "kind", "subject", "reason"}); err != nil {
		return err
	}
	for _, p := range policies {
		for _, e := range p.Events {
			if err := cw.Write([]string{p.Policy, e.At.UTC().Format(time.RFC3339), e.Kind, e.Subject, e.Reason}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// idleShare is the share of a lease's billed GPU-time nobody used.
func idleShare(l sim.LeaseRecord) string {
	paid := int64(l.GPUs) * int64(core.WholeGPU) * int64(l.Billed/time.Second)
	if paid <= 0 {
		return ""
	}
	return string(Number(max(paid-l.AllocatedMilliSec, 0)*10000/paid, 10000))
}

// waitCDFs draws the waiting-time CDF of each tier, one line per policy,
// from the percentiles of the waits (first start − submit). The x axis
// stops at the largest p99 of the tier so the tail does not flatten the
// rest; the table above has p99 and the JSON every percentile.
func waitCDFs(results []*sim.Result) string {
	var b strings.Builder
	for _, tier := range []core.Tier{core.TierCore, core.TierRegular, core.TierOffline} {
		var ss []series
		var xmax int64
		for _, r := range results {
			if w := r.WaitsByTier[tier]; len(w.Percentiles) == 101 {
				xmax = max(xmax, w.P99)
			}
		}
		for i, r := range results {
			w := r.WaitsByTier[tier]
			if len(w.Percentiles) != 101 {
				continue
			}
			sr := series{Name: r.Policy, Color: palette[i%len(palette)], Step: true}
			for k, x := range w.Percentiles {
				if x > xmax {
					break
				}
				sr.Points = append(sr.Points, [2]float64{float64(x), float64(k) / 100})
			}
			// Flat to the right edge from the last percentile drawn.
			last := sr.Points[len(sr.Points)-1]
			sr.Points = append(sr.Points, [2]float64{float64(max(xmax, 1)), last[1]})
			ss = append(ss, sr)
		}
		if len(ss) == 0 {
			continue
		}
		b.WriteString(lineChart(fmt.Sprintf("Waiting time CDF, %s tier (to the largest p99, %d s)", tier, xmax), "seconds waited", "share of units", ss))
	}
	return b.String()
}

// label names r's policy in a table cell or a CSV row: the name alone for
// an unchanged preset, else with its file and hash.
func label(r *sim.Result) string { return cmp.Or(r.PolicyLabel, r.Policy) }
