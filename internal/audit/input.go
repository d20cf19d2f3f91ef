package audit

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Input is everything an audit looks at. Times are instants; Location
// places the calendar periods.
type Input struct {
	// From and To bound the audited range [From, To).
	From, To time.Time
	// Location is the time zone of the calendar weeks and months (UTC if
	// nil).
	Location *time.Location
	// Period is the length of the periods the range is cut into.
	Period PeriodKind
	// Now is when the data was read: open leases are billed, and open
	// runs counted, up to it. Zero means To.
	Now time.Time
	// Team, when set, restricts the report to one team: its lines, jobs,
	// alerts and job recommendations. Idle capacity and the fleet's
	// committed base belong to no team and are left out.
	Team string
	// Currency is the catalog's, for display.
	Currency core.Currency
	// Offers are the catalog's offers: leases are priced by them, and
	// recommendations pick cheaper models among them.
	Offers []core.Offer
	Leases []Lease
	Runs   []Run
	Jobs   []core.Job
	// Samples are per-GPU readings; utilization and memory evidence comes
	// from them.
	Samples []core.Sample
	Alerts  []Alert
	Config  Config
}

// Lease is one rented machine as the audit sees it.
type Lease struct {
	ID      string
	OfferID string
	Mode    core.BillingMode
	Start   time.Time
	// End is when billing stopped; zero while the lease is open.
	End time.Time
	// Reclaimed marks a spot lease the provider took back.
	Reclaimed bool
	// Earlier are the terms it was billed on before Mode from Start
	// (core.Lease.Earlier): each is billed whole on its own plan.
	Earlier []core.Term
}

// Run is one stretch of a job's unit on GPUs of one lease: a gang across
// machines is one Run per machine.
type Run struct {
	JobID string
	// Unit is the unit's key ("job" or "job#shard").
	Unit    string
	LeaseID string
	// GPUs are the lease's GPU indexes it held.
	GPUs []int
	// Milli is the share of each GPU (1000: whole GPUs).
	Milli core.Milli
	From  time.Time
	// To is when it stopped; zero while it runs.
	To time.Time
}

// Alert is an alert as the audit counts it.
type Alert struct {
	// Kind is the ladder's (idle-alert, idle-notify, idle-action, zombie)
	// or another (budget).
	Kind    string
	LeaseID string
	GPU     int
	Unit    string
	Team    string
	Raised  time.Time
	// Resolved is zero while the alert is open. A resolved zombie alert
	// counts as a zombie released.
	Resolved time.Time
}

// ZombieKind is the alert kind of a zombie (fleet.Ladder's).
const ZombieKind = "zombie"

// Config holds the thresholds of the recommendations. The zero value of a
// field means its default (see Defaults).
type Config struct {
	// MemPeakBP: a job whose peak GPU memory is at most this share of what
	// it asked (basis points) is right-sized. Default 5000 (50%).
	MemPeakBP int64
	// MemHeadroomBP is the margin kept above the peak when choosing the
	// smaller memory: need = peak × MemHeadroomBP / 10000. Default 12500
	// (peak + 25%).
	MemHeadroomBP int64
	// ShareStepMilli is the step a recommended GPU share is rounded up
	// to. Default 250 (quarter GPUs).
	ShareStepMilli core.Milli
	// UtilP95Pct: a job whose 95th-percentile utilization is under this is
	// a downgrade candidate. Default 30.
	UtilP95Pct int
	// TargetUtilPct is the utilization a downgraded model may run at when
	// the throughput table tells its speed: the candidate must do the
	// job's observed work at no more than this. Default 80.
	TargetUtilPct int
	// WorkUtilPct: a GPU "shows work" when a sample reaches it. Default 5.
	WorkUtilPct int
	// MinSamples is the fewest samples a job needs in a period for a
	// recommendation that reads utilization or memory. Default 10.
	MinSamples int
	// MinSaving is the least saving worth a recommendation. Default 0.01
	// (10_000 micros).
	MinSaving core.Micros
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	if c.MemPeakBP == 0 {
		c.MemPeakBP = 5000
	}
	if c.MemHeadroomBP == 0 {
		c.MemHeadroomBP = 12500
	}
	if c.ShareStepMilli == 0 {
		c.ShareStepMilli = 250
	}
	if c.UtilP95Pct == 0 {
		c.UtilP95Pct = 30
	}
	if c.TargetUtilPct == 0 {
		c.TargetUtilPct = 80
	}
	if c.WorkUtilPct == 0 {
		c.WorkUtilPct = 5
	}
	if c.MinSamples == 0 {
		c.MinSamples = 10
	}
	if c.MinSaving == 0 {
		c.MinSaving = 10_000
	}
	return c
}

// Validate reports the first threshold out of its range.
func (c Config) Validate() error {
	switch {
	case c.MemPeakBP < 1 || c.MemPeakBP > 10000:
		return &core.FieldError{Field: "mem_peak_bp", Value: fmt.Sprint(c.MemPeakBP), Allowed: "1..10000 basis points"}
	case c.MemHeadroomBP < 10000 || c.MemHeadroomBP > 100000:
		return &core.FieldError{Field: "mem_headroom_bp", Value: fmt.Sprint(c.MemHeadroomBP), Allowed: "10000..100000 basis points (1x..10x the peak)"}
	case c.ShareStepMilli < 1 || c.ShareStepMilli > core.WholeGPU:
		return &core.FieldError{Field: "share_step_milli", Value: fmt.Sprint(c.ShareStepMilli), Allowed: "1..1000 milli-GPUs"}
	case c.UtilP95Pct < 1 || c.UtilP95Pct > 100:
		return &core.FieldError{Field: "util_p95_pct", Value: fmt.Sprint(c.UtilP95Pct), Allowed: "1..100"}
	case c.TargetUtilPct < 1 || c.TargetUtilPct > 100:
		return &core.FieldError{Field: "target_util_pct", Value: fmt.Sprint(c.TargetUtilPct), Allowed: "1..100"}
	case c.WorkUtilPct < 1 || c.WorkUtilPct > 100:
		return &core.FieldError{Field: "work_util_pct", Value: fmt.Sprint(c.WorkUtilPct), Allowed: "1..100"}
	case c.MinSamples < 1:
		return &core.FieldError{Field: "min_samples", Value: fmt.Sprint(c.MinSamples), Allowed: ">= 1"}
	case c.MinSaving < 0:
		return &core.FieldError{Field: "min_saving", Value: c.MinSaving.String(), Allowed: ">= 0"}
	}
	return nil
}

// MaxRange is the longest range one audit covers.
const MaxRange = 366 * 24 * time.Hour

func (in *Input) validate() error {
	if in.From.IsZero() || in.To.IsZero() {
		return &core.FieldError{Field: "from/to", Value: "", Allowed: "both ends of the range"}
	}
	if !in.To.After(in.From) {
		return &core.FieldError{Field: "to", Value: in.To.Format(time.RFC3339), Allowed: "a time after from " + in.From.Format(time.RFC3339)}
	}
	if in.To.Sub(in.From) > MaxRange {
		return &core.FieldError{Field: "to", Value: in.To.Format(time.RFC3339), Allowed: "at most 366 days after from"}
	}
	if _, err := ParsePeriodKind(string(in.Period)); err != nil {
		return err
	}
	return in.Config.Validate()
}
