package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/core"
)

// milliSecPerHour is milli-GPU-seconds in one GPU-hour.
const milliSecPerHour = 3600 * 1000

func amount(m core.Micros) json.Number { return json.Number(m.Decimal()) }

// AuditSummaryView is the JSON of an audit summary. GPU-hours are
// rounded half to even to six decimals; the milli-GPU-seconds are exact.
type AuditSummaryView struct {
	PaidGPUHours          json.Number `json:"paid_gpu_hours"`
	AllocatedGPUHours     json.Number `json:"allocated_gpu_hours"`
	BusyGPUHours          json.Number `json:"busy_gpu_hours"`
	PaidMilliSeconds      int64       `json:"paid_milli_gpu_seconds"`
	AllocatedMilliSeconds int64       `json:"allocated_milli_gpu_seconds"`
	BusyMilliSeconds      int64       `json:"busy_milli_gpu_seconds"`
	Cost                  json.Number `json:"cost"`
	AllocatedCost         json.Number `json:"allocated_cost"`
	IdleCost              json.Number `json:"idle_cost"`
	ZombiesFound          int         `json:"zombies_found"`
	ZombiesReleased       int         `json:"zombies_released"`
	Alerts                int         `json:"alerts"`
}

// AuditLineView is the JSON of one team × GPU model line.
type AuditLineView struct {
	Team            string      `json:"team"`
	GPUModel        string      `json:"gpu_model"`
	GPUHours        json.Number `json:"gpu_hours"`
	BusyGPUHours    json.Number `json:"busy_gpu_hours"`
	MilliSeconds    int64       `json:"milli_gpu_seconds"`
	Cost            json.Number `json:"cost"`
	ZombiesFound    int         `json:"zombies_found"`
	ZombiesReleased int         `json:"zombies_released"`
	Alerts          int         `json:"alerts"`
}

// AuditJobView is the JSON of one job in a period.
type AuditJobView struct {
	Job          string      `json:"job"`
	Team         string      `json:"team"`
	Tier         string      `json:"tier"`
	GPUModel     string      `json:"gpu_model"`
	GPUs         int         `json:"gpus"`
	MemAskedMiB  int64       `json:"mem_asked_mib"`
	PeakMemMiB   *int64      `json:"peak_mem_mib"`
	UtilP95Pct   *int        `json:"util_p95_pct"`
	WorkingGPUs  *int        `json:"working_gpus"`
	Samples      int         `json:"samples"`
	GPUHours     json.Number `json:"gpu_hours"`
	BusyGPUHours json.Number `json:"busy_gpu_hours"`
	Cost         json.Number `json:"cost"`
}

// EvidenceView is one number behind a recommendation.
type EvidenceView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SupersededView is a smaller recommendation a larger one replaced.
type SupersededView struct {
	Kind   string      `json:"kind"`
	Action string      `json:"action"`
	Saving json.Number `json:"saving"`
}

// RecommendationView is the JSON of one recommendation.
type RecommendationView struct {
	ID         string           `json:"id"`
	Kind       string           `json:"kind"`
	Period     string           `json:"period"`
	Team       string           `json:"team,omitempty"`
	Subject    string           `json:"subject"`
	Action     string           `json:"action"`
	Saving     json.Number      `json:"saving"`
	Evidence   []EvidenceView   `json:"evidence"`
	Supersedes []SupersededView `json:"supersedes,omitempty"`
}

// AuditPeriodView is the JSON of one period.
type AuditPeriodView struct {
	Label   string           `json:"label"`
	From    time.Time        `json:"from"`
	To      time.Time        `json:"to"`
	Summary AuditSummaryView `json:"summary"`
	Saving  json.Number      `json:"saving"`
	Lines   []AuditLineView  `json:"lines"`
	Jobs    []AuditJobView   `json:"jobs"`
}

// AuditConfigView is the JSON of the thresholds an audit ran with.
type AuditConfigView struct {
	MemPeakBP      int64       `json:"mem_peak_bp"`
	MemHeadroomBP  int64       `json:"mem_headroom_bp"`
	ShareStepMilli int64       `json:"share_step_milli"`
	UtilP95Pct     int         `json:"util_p95_pct"`
	TargetUtilPct  int         `json:"target_util_pct"`
	WorkUtilPct    int         `json:"work_util_pct"`
	MinSamples     int         `json:"min_samples"`
	MinSaving      json.Number `json:"min_saving"`
}

// AuditView is the JSON of an audit report: the API's and the CLI's.
type AuditView struct {
	From            time.Time            `json:"from"`
	To              time.Time            `json:"to"`
	TimeZone        string               `json:"time_zone"`
	Period          string               `json:"period"`
	Team            string               `json:"team,omitempty"`
	Currency        string               `json:"currency"`
	Config          AuditConfigView      `json:"config"`
	Total           AuditSummaryView     `json:"total"`
	Saving          json.Number          `json:"saving"`
	Recommendations []RecommendationView `json:"recommendations"`
	Periods         []AuditPeriodView    `json:"periods"`
}

func hours(ms int64) json.Number { return Number(ms, milliSecPerHour) }

func summaryView(s audit.Summary) AuditSummaryView {
	return AuditSummaryView{
		PaidGPUHours: hours(s.PaidMilliSeconds), AllocatedGPUHours: hours(s.AllocatedMilliSeconds), BusyGPUHours: hours(s.BusyMilliSeconds),
		PaidMilliSeconds: s.PaidMilliSeconds, AllocatedMilliSeconds: s.AllocatedMilliSeconds, BusyMilliSeconds: s.BusyMilliSeconds,
		Cost: amount(s.Cost), AllocatedCost: amount(s.AllocatedCost), IdleCost: amount(s.IdleCost),
		ZombiesFound: s.ZombiesFound, ZombiesReleased: s.ZombiesReleased, Alerts: s.Alerts,
	}
}

func recView(r audit.Recommendation) RecommendationView {
	v := RecommendationView{ID: r.ID, Kind: string(r.Kind), Period: r.Period, Team: r.Team, Subject: r.Subject, Action: r.Action, Saving: amount(r.Saving), Evidence: []EvidenceView{}}
	for _, e := range r.Evidence {
		v.Evidence = append(v.Evidence, EvidenceView{e.Name, e.Value})
	}
	for _, s := range r.Supersedes {
		v.Supersedes = append(v.Supersedes, SupersededView{Kind: string(s.Kind), Action: s.Action, Saving: amount(s.Saving)})
	}
	return v
}

func optional[T int | int64](v T) *T {
	if v < 0 {
		return nil
	}
	return &v
}

// NewAuditView renders r for JSON.
func NewAuditView(r audit.Report) AuditView {
	c := r.Config
	v := AuditView{From: r.From, To: r.To, TimeZone: r.Location, Period: string(r.Period), Team: r.Team, Currency: string(r.Currency),
		Config: AuditConfigView{MemPeakBP: c.MemPeakBP, MemHeadroomBP: c.MemHeadroomBP, ShareStepMilli: int64(c.ShareStepMilli), UtilP95Pct: c.UtilP95Pct,
			TargetUtilPct: c.TargetUtilPct, WorkUtilPct: c.WorkUtilPct, MinSamples: c.MinSamples, MinSaving: amount(c.MinSaving)},
		Total: summaryView(r.Total), Saving: amount(r.Saving), Recommendations: []RecommendationView{}, Periods: []AuditPeriodView{}}
	for _, x := range r.Recommendations {
		v.Recommendations = append(v.Recommendations, recView(x))
	}
	for _, p := range r.Periods {
		pv := AuditPeriodView{Label: p.Label, From: p.From, To: p.To, Summary: summaryView(p.Summary), Saving: amount(p.Saving), Lines: []AuditLineView{}, Jobs: []AuditJobView{}}
		for _, l := range p.Lines {
			pv.Lines = append(pv.Lines, AuditLineView{Team: l.Team, GPUModel: l.GPUModel, GPUHours: hours(l.MilliSeconds), BusyGPUHours: hours(l.BusyMilliSeconds),
				MilliSeconds: l.MilliSeconds, Cost: amount(l.Cost), ZombiesFound: l.ZombiesFound, ZombiesReleased: l.ZombiesReleased, Alerts: l.Alerts})
		}
		for _, j := range p.Jobs {
			pv.Jobs = append(pv.Jobs, AuditJobView{Job: j.JobID, Team: j.Team, Tier: string(j.Tier), GPUModel: j.GPUModel, GPUs: j.GPUs, MemAskedMiB: j.MemAskedMiB,
				PeakMemMiB: optional(j.PeakMemMiB), UtilP95Pct: optional(j.UtilP95Pct), WorkingGPUs: optional(j.WorkingGPUs), Samples: j.Samples,
				GPUHours: hours(j.AllocatedMilliSeconds), BusyGPUHours: hours(j.BusyMilliSeconds), Cost: amount(j.Cost)})
		}
		v.Periods = append(v.Periods, pv)
	}
	return v
}

// WriteAuditJSON writes r as indented JSON.
func WriteAuditJSON(w io.Writer, r audit.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(NewAuditView(r))
}

// AuditCSVHeader is the header of the audit CSV.
var AuditCSVHeader = []string{"record", "period", "team", "gpu_model", "subject", "kind", "gpu_hours", "busy_gpu_hours", "cost", "idle_cost",
	"zombies_found", "zombies_released", "alerts", "saving", "action", "evidence", "id"}

// CSVText makes a text cell safe to open in a spreadsheet: a cell that
// starts with = + - @, a tab or a carriage return is a formula to Excel,
// LibreOffice and Google Sheets (OWASP "CSV injection"), so it gets a
// leading single quote, which they show as text. Only cells of text that
// came from users or the store pass through it (ids, teams, subjects,
// actions, evidence); numbers we format ourselves, negative ones
// included, are written as they are.
func CSVText(s string) string {
	if s != "" && strings.IndexByte("=+-@\t\r", s[0]) >= 0 {
		return "'" + s
	}
	return s
}

// WriteAuditCSV writes r as one CSV table: a "period" row per period
// (its totals), a "line" row per team × GPU model line (the idle lines
// with team "(idle)"), a "job" row per job and period, and a
// "recommendation" row per recommendation with its evidence as
// name=value pairs separated by "; ". Text cells go through CSVText.
func WriteAuditCSV(w io.Writer, r audit.Report) error {
	cw := csv.NewWriter(w)
	t := CSVText
	_ = cw.Write(AuditCSVHeader)
	h := func(ms int64) string { return string(hours(ms)) }
	it := strconv.Itoa
	for _, p := range r.Periods {
		s := p.Summary
		_ = cw.Write([]string{"period", t(p.Label), t(r.Team), "", "", "", h(s.PaidMilliSeconds), h(s.BusyMilliSeconds), s.Cost.Decimal(), s.IdleCost.Decimal(),
			it(s.ZombiesFound), it(s.ZombiesReleased), it(s.Alerts), p.Saving.Decimal(), "", "", ""})
		for _, l := range p.Lines {
			idle := ""
			if l.Team == audit.IdleTeam {
				idle = l.Cost.Decimal()
			}
			_ = cw.Write([]string{"line", t(p.Label), t(l.Team), t(l.GPUModel), "", "", h(l.MilliSeconds), h(l.BusyMilliSeconds), l.Cost.Decimal(), idle,
				it(l.ZombiesFound), it(l.ZombiesReleased), it(l.Alerts), "", "", "", ""})
		}
		for _, j := range p.Jobs {
			_ = cw.Write([]string{"job", t(p.Label), t(j.Team), t(j.GPUModel), t(j.JobID), t(string(j.Tier)), h(j.AllocatedMilliSeconds), h(j.BusyMilliSeconds), j.Cost.Decimal(), "",
				"", "", "", "", "", t(jobEvidence(j)), ""})
		}
	}
	for _, x := range r.Recommendations {
		model := ""
		if x.Kind == audit.LeaseChange {
			model = x.Subject
		} else {
			for _, e := range x.Evidence {
				if e.Name == "gpu_model" {
					model = e.Value
				}
			}
		}
		_ = cw.Write([]string{"recommendation", t(x.Period), t(x.Team), t(model), t(x.Subject), t(string(x.Kind)), "", "", "", "", "", "", "", x.Saving.Decimal(),
			t(x.Action), t(evidenceText(x)), t(x.ID)})
	}
	cw.Flush()
	return cw.Error()
}

func jobEvidence(j audit.JobLine) string {
	parts := []string{fmt.Sprintf("gpus=%d", j.GPUs), fmt.Sprintf("mem_asked_mib=%d", j.MemAskedMiB)}
	if j.PeakMemMiB >= 0 {
		parts = append(parts, fmt.Sprintf("peak_mem_mib=%d", j.PeakMemMiB))
	}
	if j.UtilP95Pct >= 0 {
		parts = append(parts, fmt.Sprintf("util_p95_pct=%d", j.UtilP95Pct))
	}
	if j.WorkingGPUs >= 0 {
		parts = append(parts, fmt.Sprintf("working_gpus=%d", j.WorkingGPUs))
	}
	parts = append(parts, fmt.Sprintf("samples=%d", j.Samples))
	return strings.Join(parts, "; ")
}

func evidenceText(x audit.Recommendation) string {
	parts := make([]string, 0, len(x.Evidence)+len(x.Supersedes))
	for _, e := range x.Evidence {
		parts = append(parts, e.Name+"="+e.Value)
	}
	for _, s := range x.Supersedes {
		parts = append(parts, fmt.Sprintf("supersedes=%s (saving %s)", s.Kind, s.Saving.Decimal()))
	}
	return strings.Join(parts, "; ")
}
