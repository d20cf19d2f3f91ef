package audit

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// PeriodKind is the length of an audit period: a calendar week (Monday to
// Monday) or month, in the input's time zone.
type PeriodKind string

// The period kinds.
const (
	Week  PeriodKind = "week"
	Month PeriodKind = "month"
)

// ParsePeriodKind validates a period kind; empty is Month.
func ParsePeriodKind(s string) (PeriodKind, error) {
	switch PeriodKind(strings.ToLower(strings.TrimSpace(s))) {
	case "", Month:
		return Month, nil
	case Week:
		return Week, nil
	}
	return "", &core.FieldError{Field: "period", Value: s, Allowed: "week or month"}
}

// Window is one audit period, clipped to the audited range.
type Window struct {
	// Label names the calendar period: "2026-11" or "2026-W45" (ISO week).
	Label    string
	From, To time.Time
}

// Periods cuts [from, to) into the calendar periods of kind in loc, the
// first and last clipped to the range.
func Periods(from, to time.Time, loc *time.Location, kind PeriodKind) []Window {
	if loc == nil {
		loc = time.UTC
	}
	var out []Window
	t := from.In(loc)
	var start time.Time
	switch kind {
	case Week:
		start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		back := (int(start.Weekday()) + 6) % 7 // days since Monday
		start = start.AddDate(0, 0, -back)
	default:
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	}
	for start.Before(to) {
		var next time.Time
		var label string
		switch kind {
		case Week:
			next = start.AddDate(0, 0, 7)
			y, w := start.ISOWeek()
			label = fmt.Sprintf("%04d-W%02d", y, w)
		default:
			next = start.AddDate(0, 1, 0)
			label = start.Format("2006-01")
		}
		a, z := start, next
		if a.Before(from) {
			a = from
		}
		if z.After(to) {
			z = to
		}
		if z.After(a) {
			out = append(out, Window{Label: label, From: a.UTC(), To: z.UTC()})
		}
		start = next
	}
	return out
}

// ParseTime reads one end of an audit range: a month "2026-11" (its first
// instant), a date "2026-11-02" (its midnight) — both in loc — or an RFC
// 3339 instant, from 1970 to 9998. field names the flag or parameter in
// the error.
func ParseTime(field, s string, loc *time.Location) (time.Time, error) {
	if loc == nil {
		loc = time.UTC
	}
	t := strings.TrimSpace(s)
	ok := func(v time.Time) bool { return v.UTC().Year() >= 1970 && v.UTC().Year() < 9999 }
	for _, layout := range []string{"2006-01", "2006-01-02"} {
		if len(t) == len(layout) {
			if v, err := time.ParseInLocation(layout, t, loc); err == nil && ok(v) {
				return v, nil
			}
		}
	}
	if v, err := time.Parse(time.RFC3339Nano, t); err == nil && ok(v) {
		return v, nil
	}
	return time.Time{}, &core.FieldError{Field: field, Value: s, Allowed: "a month (2026-11), a date (2026-11-02) or an RFC 3339 time (2026-11-02T08:00:00Z), years 1970..9998"}
}

// ParseLocation validates an IANA time zone name; empty is UTC.
func ParseLocation(s string) (*time.Location, error) {
	if strings.TrimSpace(s) == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, &core.FieldError{Field: "tz", Value: s, Allowed: "an IANA time zone such as UTC or Asia/Shanghai"}
	}
	return loc, nil
}
