package report

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/core"
)

const auditCSS = `body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f2f2f2}tr.idle td{color:#a33}
.kpi{display:inline-block;margin:0 24px 8px 0}.kpi b{display:block;font-size:20px}
.ev{font-size:12px;color:#444}.muted{color:#777;font-size:12px}
@media print{body{margin:0;max-width:none;font-size:11px}h2{break-before:page}h2:first-of-type{break-before:auto}
table,svg,.rec{break-inside:avoid}a{color:inherit;text-decoration:none}.noprint{display:none}}`

func esc(s string) string { return html.EscapeString(s) }

func gh(ms int64) string { return string(hours(ms)) }

// WriteAuditHTML writes r as one self-contained, printable HTML page:
// totals, charts as inline SVG, and the lines, jobs and recommendations
// with their evidence. No script, font or image is loaded from anywhere.
func WriteAuditHTML(w io.Writer, r audit.Report) error {
	var b strings.Builder
	cur := string(r.Currency)
	scope := "all teams"
	if r.Team != "" {
		scope = "team " + r.Team
	}
	title := fmt.Sprintf("GPU audit %s – %s (%s)", r.From.Format("2006-01-02"), r.To.Format("2006-01-02"), scope)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head><body>\n", esc(title), auditCSS)
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p class=\"muted\">Range [%s, %s), periods by calendar %s in %s. Money in %s; savings are per period, on the work as it ran.</p>\n",
		esc(title), r.From.Format("2006-01-02 15:04 MST"), r.To.Format("2006-01-02 15:04 MST"), esc(string(r.Period)), esc(r.Location), esc(cur))
	t := r.Total
	kpi := func(label, value string) {
		fmt.Fprintf(&b, `<span class="kpi">%s<b>%s</b></span>`, esc(label), esc(value))
	}
	kpi("Cost", t.Cost.String()+" "+cur)
	if r.Team == "" {
		kpi("Idle cost", t.IdleCost.String()+" "+cur)
		kpi("Idle share", share(t.PaidMilliSeconds-t.AllocatedMilliSeconds, t.PaidMilliSeconds))
	}
	kpi("Paid GPU-h", gh(t.PaidMilliSeconds))
	kpi("Allocated GPU-h", gh(t.AllocatedMilliSeconds))
	kpi("Busy GPU-h", gh(t.BusyMilliSeconds))
	kpi("Zombies found / released", fmt.Sprintf("%d / %d", t.ZombiesFound, t.ZombiesReleased))
	kpi("Alerts", fmt.Sprint(t.Alerts))
	kpi("Possible saving", r.Saving.String()+" "+cur)
	b.WriteString("\n")

	// Charts: cost per team (stacked by model), savings per kind.
	teams, models := []string{}, []string{}
	cost := map[[2]string]core.Micros{}
	for _, p := range r.Periods {
		for _, l := range p.Lines {
			if !slices.Contains(teams, l.Team) {
				teams = append(teams, l.Team)
			}
			if !slices.Contains(models, l.GPUModel) {
				models = append(models, l.GPUModel)
			}
			cost[[2]string{l.Team, l.GPUModel}] += l.Cost
		}
	}
	slices.Sort(teams)
	slices.Sort(models)
	colors := []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"}
	if len(teams) > 0 {
		vals := make([][]float64, len(teams))
		for i, tm := range teams {
			for _, m := range models {
				vals[i] = append(vals[i], cost[[2]string{tm, m}].Float())
			}
		}
		b.WriteString(barChart("Cost by team and GPU model ("+cur+")", teams, models, colors, vals, cur))
		b.WriteString("\n")
	}
	if len(r.Recommendations) > 0 {
		kinds := []audit.Kind{audit.RightSizeMemory, audit.RightSizeCount, audit.ModelDowngrade, audit.LeaseChange, audit.OffPeak}
		rows, vals := []string{}, [][]float64{}
		for _, k := range kinds {
			var s core.Micros
			for _, x := range r.Recommendations {
				if x.Kind == k {
					s += x.Saving
				}
			}
			if s > 0 {
				rows = append(rows, string(k))
				vals = append(vals, []float64{s.Float()})
			}
		}
		b.WriteString(barChart("Possible saving by kind ("+cur+")", rows, []string{"saving"}, []string{"#59a14f"}, vals, cur))
		b.WriteString("\n")
	}

	// Recommendations.
	b.WriteString("<h2>Recommendations</h2>\n")
	if len(r.Recommendations) == 0 {
		b.WriteString("<p>None: nothing crossed the thresholds.</p>\n")
	} else {
		b.WriteString("<table><tr><th>#</th><th>Period</th><th>Kind</th><th>Team</th><th>Subject</th><th>Saving</th><th>Action and evidence</th></tr>\n")
		for i, x := range r.Recommendations {
			fmt.Fprintf(&b, `<tr class="rec"><td class="n">%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class="n">%s</td><td>%s<div class="ev">`,
				i+1, esc(x.Period), esc(string(x.Kind)), esc(x.Team), esc(x.Subject), x.Saving.String(), esc(x.Action))
			for k, e := range x.Evidence {
				if k > 0 {
					b.WriteString(" · ")
				}
				fmt.Fprintf(&b, "%s: <b>%s</b>", esc(e.Name), esc(e.Value))
			}
			for _, s := range x.Supersedes {
				fmt.Fprintf(&b, "<br>instead of %s (saving %s): %s", esc(string(s.Kind)), s.Saving.String(), esc(s.Action))
			}
			b.WriteString("</div></td></tr>\n")
		}
		b.WriteString("</table>\n")
	}

	// Periods.
	for _, p := range r.Periods {
		s := p.Summary
		fmt.Fprintf(&b, "<h2>%s <span class=\"muted\">[%s, %s)</span></h2>\n", esc(p.Label), p.From.Format("2006-01-02 15:04"), p.To.Format("2006-01-02 15:04"))
		fmt.Fprintf(&b, "<p>Cost <b>%s</b> (allocated %s, idle %s); paid %s GPU-h, allocated %s, busy %s; zombies %d found, %d released; %d alerts; possible saving %s.</p>\n",
			s.Cost, s.AllocatedCost, s.IdleCost, gh(s.PaidMilliSeconds), gh(s.AllocatedMilliSeconds), gh(s.BusyMilliSeconds), s.ZombiesFound, s.ZombiesReleased, s.Alerts, p.Saving)
		b.WriteString("<h3>By team and GPU model</h3>\n<table><tr><th>Team</th><th>GPU model</th><th>GPU-h</th><th>Busy GPU-h</th><th>Cost</th><th>Zombies found</th><th>released</th><th>Alerts</th></tr>\n")
		for _, l := range p.Lines {
			cls := ""
			if l.Team == audit.IdleTeam {
				cls = ` class="idle"`
			}
			fmt.Fprintf(&b, `<tr%s><td>%s</td><td>%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%d</td><td class="n">%d</td><td class="n">%d</td></tr>`+"\n",
				cls, esc(l.Team), esc(l.GPUModel), gh(l.MilliSeconds), gh(l.BusyMilliSeconds), l.Cost, l.ZombiesFound, l.ZombiesReleased, l.Alerts)
		}
		b.WriteString("</table>\n")
		if len(p.Jobs) > 0 {
			b.WriteString("<h3>Jobs</h3>\n<table><tr><th>Job</th><th>Team</th><th>Tier</th><th>GPU model</th><th>GPUs</th><th>Memory asked / peak (MiB)</th><th>Util p95</th><th>Working GPUs</th><th>GPU-h</th><th>Busy GPU-h</th><th>Cost</th></tr>\n")
			for _, j := range p.Jobs {
				fmt.Fprintf(&b, `<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class="n">%d</td><td class="n">%d / %s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td><td class="n">%s</td></tr>`+"\n",
					esc(j.JobID), esc(j.Team), esc(string(j.Tier)), esc(j.GPUModel), j.GPUs, j.MemAskedMiB, unknown(j.PeakMemMiB, ""), unknown(int64(j.UtilP95Pct), "%"),
					unknown(int64(j.WorkingGPUs), ""), gh(j.AllocatedMilliSeconds), gh(j.BusyMilliSeconds), j.Cost)
			}
			b.WriteString("</table>\n")
		}
	}
	c := r.Config
	fmt.Fprintf(&b, "<h2>Thresholds</h2>\n<p class=\"ev\">Memory: peak at most %s of what was asked, sized to the peak × %s, shares in steps of %d milli-GPU. Downgrade: p95 utilization under %d%%, a faster table's model at most %d%% busy. A GPU works when a sample reaches %d%%. At least %d samples; savings under %s are left out. One recommendation per job: the largest.</p>\n",
		bp(c.MemPeakBP), bpX(c.MemHeadroomBP), c.ShareStepMilli, c.UtilP95Pct, c.TargetUtilPct, c.WorkUtilPct, c.MinSamples, c.MinSaving)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func unknown(v int64, unit string) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%d%s", v, unit)
}

func share(part, whole int64) string {
	if whole == 0 {
		return "–"
	}
	v := core.MulDivHalfEven(part, 10000, whole)
	return fmt.Sprintf("%d.%02d%%", v/100, v%100)
}

func bp(v int64) string  { return fmt.Sprintf("%d.%02d%%", v/100, v%100) }
func bpX(v int64) string { return core.Micros(v*100).Decimal() + "x" }
