package pricing

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Catalog is a price catalog: offers and vouchers, all in one currency.
type Catalog struct {
	Currency core.Currency
	Offers   []core.Offer
	Vouchers []core.Voucher
}

// Offer returns the offer with the given id. For an unknown id the error
// wraps ErrUnknownOffer, names the id and suggests near ids if there are
// any.
func (c *Catalog) Offer(id string) (*core.Offer, error) {
	for i := range c.Offers {
		if c.Offers[i].ID == id {
			return &c.Offers[i], nil
		}
	}
	ids := make([]string, len(c.Offers))
	for i := range c.Offers {
		ids[i] = c.Offers[i].ID
	}
	if near := nearest(id, ids, 3); len(near) > 0 {
		return nil, fmt.Errorf("%w %q: did you mean %s?", ErrUnknownOffer, id, strings.Join(near, ", "))
	}
	return nil, fmt.Errorf("%w %q: the catalog has %d offers", ErrUnknownOffer, id, len(c.Offers))
}

// Filter returns the offers whose GPU model contains gpuModel and whose
// region is region, both ignoring case; an empty argument matches every
// offer. The offers keep their catalog order.
func (c *Catalog) Filter(gpuModel, region string) []core.Offer {
	gpuModel = strings.ToLower(strings.TrimSpace(gpuModel))
	region = strings.TrimSpace(region)
	var out []core.Offer
	for _, o := range c.Offers {
		if gpuModel != "" && !strings.Contains(strings.ToLower(o.GPUModel), gpuModel) {
			continue
		}
		if region != "" && !strings.EqualFold(o.Region, region) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// Limits on a catalog's numbers: wide enough for any real machine and
// contract, narrow enough that billing arithmetic cannot overflow.
const (
	maxGPUs       = 1024
	maxGPUMemMiB  = 1 << 30 // 1 PiB per GPU
	maxVCPUs      = 1 << 20
	maxMemoryMiB  = 1 << 40
	maxSpanSecs   = 120 * 730 * 3600 // ten years of 730-hour months
	maxNameLength = 200
)

// Validate reports the first problem with c as a *core.FieldError whose
// Field is a path such as offers[3].plans[1].price. It checks the
// currency, that offer and voucher ids are unique, every offer's machine
// (GPUs > 0, sizes >= 0) and plans (core's PricePlan.Validate, plus: modes
// are canonical and unique per offer, committed modes have a term and the
// others none, series and reclaim models only on spot plans), and every
// voucher (share, cap, validity, and filters that name what the catalog
// has).
func (c *Catalog) Validate() error {
	cur, err := core.ParseCurrency(string(c.Currency))
	if err != nil || cur != c.Currency {
		return &core.FieldError{Field: "currency", Value: string(c.Currency), Allowed: "an ISO 4217 code in capitals such as USD, EUR, CNY"}
	}
	ids := map[string]int{}
	providers := map[string]bool{}
	models := map[string]bool{}
	for i := range c.Offers {
		o := &c.Offers[i]
		path := fmt.Sprintf("offers[%d]", i)
		if err := validateOffer(o, c.Currency); err != nil {
			return prefix(path, err)
		}
		if j, dup := ids[o.ID]; dup {
			return &core.FieldError{Field: path + ".id", Value: o.ID, Allowed: fmt.Sprintf("a unique id (offers[%d] has it)", j)}
		}
		ids[o.ID] = i
		providers[o.Provider] = true
		models[o.GPUModel] = true
	}
	vids := map[string]int{}
	for i := range c.Vouchers {
		v := &c.Vouchers[i]
		path := fmt.Sprintf("vouchers[%d]", i)
		if err := validateVoucher(v, providers, models); err != nil {
			return prefix(path, err)
		}
		if j, dup := vids[v.ID]; dup {
			return &core.FieldError{Field: path + ".id", Value: v.ID, Allowed: fmt.Sprintf("a unique id (vouchers[%d] has it)", j)}
		}
		vids[v.ID] = i
	}
	return nil
}

func validateOffer(o *core.Offer, cur core.Currency) error {
	if err := checkName("provider", o.Provider, true); err != nil {
		return err
	}
	if err := checkText("region", o.Region, false); err != nil {
		return err
	}
	if err := checkText("instance_type", o.InstanceType, false); err != nil {
		return err
	}
	if err := checkText("gpu_model", o.GPUModel, true); err != nil {
		return err
	}
	if err := checkName("id", o.ID, true); err != nil {
		return err
	}
	if o.GPUs < 1 || o.GPUs > maxGPUs {
		return &core.FieldError{Field: "gpus", Value: fmt.Sprint(o.GPUs), Allowed: fmt.Sprintf("a whole number of GPUs 1..%d", maxGPUs)}
	}
	if err := validateHardware(o); err != nil {
		return err
	}
	if o.GPUMemMiB < 0 || o.GPUMemMiB > maxGPUMemMiB {
		return &core.FieldError{Field: "gpu_memory_gib", Value: formatMiBAsGiB(o.GPUMemMiB), Allowed: "GiB per GPU, >= 0 (0: unknown)"}
	}
	if o.VCPUs < 0 || o.VCPUs > maxVCPUs {
		return &core.FieldError{Field: "vcpus", Value: fmt.Sprint(o.VCPUs), Allowed: "a number of vCPUs >= 0 (0: unknown)"}
	}
	if o.MemoryMiB < 0 || o.MemoryMiB > maxMemoryMiB {
		return &core.FieldError{Field: "memory_gib", Value: formatMiBAsGiB(o.MemoryMiB), Allowed: "GiB >= 0 (0: unknown)"}
	}
	if o.Currency != cur {
		return &core.FieldError{Field: "currency", Value: string(o.Currency), Allowed: fmt.Sprintf("the catalog's currency %s (one catalog has one currency)", cur)}
	}
	if len(o.Plans) == 0 {
		return &core.FieldError{Field: "plans", Value: "", Allowed: "at least one price plan"}
	}
	seen := map[core.BillingMode]int{}
	for j := range o.Plans {
		p := &o.Plans[j]
		path := fmt.Sprintf("plans[%d]", j)
		if err := validatePlan(p); err != nil {
			return prefix(path, err)
		}
		if k, dup := seen[p.Mode]; dup {
			return &core.FieldError{Field: path + ".mode", Value: string(p.Mode), Allowed: fmt.Sprintf("one plan per mode (plans[%d] is %s too)", k, p.Mode)}
		}
		seen[p.Mode] = j
	}
	return nil
}

func validatePlan(p *core.PricePlan) error {
	if m, err := core.ParseBillingMode(string(p.Mode)); err != nil || m != p.Mode {
		return &core.FieldError{Field: "mode", Value: string(p.Mode), Allowed: "one of on-demand, spot, daily, weekly, monthly"}
	}
	if err := p.Validate(); err != nil {
		return err
	}
	committed := p.Mode == core.Daily || p.Mode == core.Weekly || p.Mode == core.Monthly
	switch {
	case committed && p.Term <= 0:
		return &core.FieldError{Field: "term", Value: "", Allowed: fmt.Sprintf("a committed term for a %s plan, such as 1 %s", p.Mode, termPeriod(p.Mode))}
	case !committed && p.Term != 0:
		return &core.FieldError{Field: "term", Value: formatSpan(p.Term), Allowed: "no term on an " + string(p.Mode) + " plan (terms are for daily, weekly and monthly plans)"}
	}
	for _, s := range []struct {
		field string
		v     int64
	}{{"granularity", p.Granularity}, {"min_charge", p.MinCharge}, {"term", p.Term}} {
		if s.v > maxSpanSecs {
			return &core.FieldError{Field: s.field, Value: formatSpan(s.v), Allowed: "at most 120 months"}
		}
	}
	if et := p.EarlyTermination; et != nil {
		if !committed {
			return &core.FieldError{Field: "mode", Value: string(p.Mode), Allowed: "daily, weekly or monthly for a plan with early_termination (a committed term)"}
		}
		if et.Granularity > maxSpanSecs {
			return &core.FieldError{Field: "early_termination.granularity", Value: formatSpan(et.Granularity), Allowed: "at most 120 months"}
		}
	}
	if p.Mode != core.Spot {
		if len(p.Series) > 0 {
			return &core.FieldError{Field: "mode", Value: string(p.Mode), Allowed: "spot for a plan with a price series"}
		}
		if p.Reclaim != nil {
			return &core.FieldError{Field: "mode", Value: string(p.Mode), Allowed: "spot for a plan with a reclaim model"}
		}
	}
	if r := p.Reclaim; r != nil {
		if err := checkText("reclaim.bucket", r.Bucket, false); err != nil {
			return err
		}
		if r.NoticeSeconds > maxSpanSecs {
			return &core.FieldError{Field: "reclaim.notice", Value: formatSpan(r.NoticeSeconds), Allowed: "at most 120 months"}
		}
	}
	for i, pt := range p.Series {
		if pt.At.IsZero() {
			return &core.FieldError{Field: fmt.Sprintf("series[%d].at", i), Value: "", Allowed: "an RFC 3339 time"}
		}
	}
	if t := p.TimeOfUse; t != nil {
		name := t.Location.String()
		if name == "Local" {
			return &core.FieldError{Field: "time_of_use.timezone", Value: name, Allowed: "an IANA time zone such as Asia/Shanghai (not the host's Local zone)"}
		}
		if _, err := time.LoadLocation(name); err != nil {
			return &core.FieldError{Field: "time_of_use.timezone", Value: name, Allowed: "an IANA time zone such as Asia/Shanghai"}
		}
		if len(t.Windows) == 0 {
			return &core.FieldError{Field: "time_of_use.windows", Value: "", Allowed: "at least one window"}
		}
		for i, w := range t.Windows {
			var seen [7]bool
			for _, d := range w.Weekdays {
				if d < time.Sunday || d > time.Saturday {
					return &core.FieldError{Field: fmt.Sprintf("time_of_use.windows[%d].weekdays", i), Value: fmt.Sprint(int(d)), Allowed: "weekdays sun..sat"}
				}
				if seen[d] {
					return &core.FieldError{Field: fmt.Sprintf("time_of_use.windows[%d].weekdays", i), Value: dayName(d), Allowed: "each weekday at most once"}
				}
				seen[d] = true
			}
		}
	}
	return nil
}

func termPeriod(m core.BillingMode) core.Period {
	switch m {
	case core.Daily:
		return core.Day
	case core.Weekly:
		return core.Week
	case core.Monthly:
		return core.Month
	}
	return core.Hour
}

func validateVoucher(v *core.Voucher, providers, models map[string]bool) error {
	if err := checkName("id", v.ID, true); err != nil {
		return err
	}
	if v.ShareBP < 1 || v.ShareBP > 10000 {
		return &core.FieldError{Field: "share", Value: formatPercentBP(v.ShareBP), Allowed: "a share above 0% and at most 100%, such as 30% or 0.3"}
	}
	if v.Cap <= 0 {
		return &core.FieldError{Field: "cap", Value: v.Cap.String(), Allowed: "an amount > 0"}
	}
	if v.ValidFrom.IsZero() {
		return &core.FieldError{Field: "valid_from", Value: "", Allowed: "a date or RFC 3339 time"}
	}
	if !v.ValidTo.After(v.ValidFrom) {
		return &core.FieldError{Field: "valid_to", Value: formatTime(v.ValidTo), Allowed: "a time after valid_from " + formatTime(v.ValidFrom)}
	}
	if err := checkSet("providers", v.Providers, providers, "a provider of an offer in the catalog"); err != nil {
		return err
	}
	if err := checkSet("gpu_models", v.GPUModels, models, "a GPU model of an offer in the catalog"); err != nil {
		return err
	}
	seen := map[core.BillingMode]bool{}
	for i, m := range v.Modes {
		field := fmt.Sprintf("modes[%d]", i)
		if c, err := core.ParseBillingMode(string(m)); err != nil || c != m {
			return &core.FieldError{Field: field, Value: string(m), Allowed: "one of on-demand, spot, daily, weekly, monthly"}
		}
		if seen[m] {
			return &core.FieldError{Field: field, Value: string(m), Allowed: "each mode at most once"}
		}
		seen[m] = true
	}
	return nil
}

func checkSet(field string, list []string, known map[string]bool, allowed string) error {
	seen := map[string]bool{}
	for i, s := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !known[s] {
			return &core.FieldError{Field: f, Value: s, Allowed: allowed + knownList(known)}
		}
		if seen[s] {
			return &core.FieldError{Field: f, Value: s, Allowed: "each at most once"}
		}
		seen[s] = true
	}
	return nil
}

// knownList formats a few of the known names for an error message.
func knownList(known map[string]bool) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return " (the catalog has none)"
	}
	if len(names) > 8 {
		return " (" + strings.Join(names[:8], ", ") + ", …)"
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// checkName checks an identifier: printable, no spaces.
func checkName(field, s string, required bool) error {
	if err := checkText(field, s, required); err != nil {
		return err
	}
	if strings.IndexFunc(s, unicode.IsSpace) >= 0 {
		return &core.FieldError{Field: field, Value: s, Allowed: "a name without spaces"}
	}
	return nil
}

// checkText checks a label: valid UTF-8, printable, no surrounding space,
// at most 200 bytes.
func checkText(field, s string, required bool) error {
	switch {
	case s == "" && required:
		return &core.FieldError{Field: field, Value: "", Allowed: "a non-empty name"}
	case !utf8.ValidString(s), len(s) > maxNameLength,
		strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0,
		strings.TrimSpace(s) != s:
		return &core.FieldError{Field: field, Value: s, Allowed: "printable text of at most 200 bytes without surrounding spaces"}
	}
	return nil
}

// prefix puts path in front of a field error's field.
func prefix(path string, err error) error {
	var fe *core.FieldError
	if errors.As(err, &fe) {
		return &core.FieldError{Field: path + "." + fe.Field, Value: fe.Value, Allowed: fe.Allowed}
	}
	return fmt.Errorf("%s: %w", path, err)
}

// nearest returns up to n of the candidates closest to s: those within a
// small edit distance, and those that contain s or that s contains.
func nearest(s string, candidates []string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	ls := strings.ToLower(s)
	limit := max(2, len(s)/5)
	var found []cand
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(ls, lc, limit+1)
		switch {
		case d <= limit:
		case ls != "" && (strings.Contains(lc, ls) || strings.Contains(ls, lc)):
			d = limit + 1 + abs(len(lc)-len(ls))
		default:
			continue
		}
		found = append(found, cand{c, d})
	}
	sort.SliceStable(found, func(i, j int) bool {
		if found[i].d != found[j].d {
			return found[i].d < found[j].d
		}
		return found[i].name < found[j].name
	})
	var out []string
	for _, f := range found {
		if len(out) == n {
			break
		}
		if !slices.Contains(out, f.name) {
			out = append(out, f.name)
		}
	}
	return out
}

// editDistance is the Levenshtein distance of a and b in bytes, or stop
// if it is at least stop.
func editDistance(a, b string, stop int) int {
	if abs(len(a)-len(b)) >= stop {
		return stop
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			best = min(best, cur[j])
		}
		if best >= stop {
			return stop
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], stop)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
