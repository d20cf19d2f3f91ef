package core

import (
	"strconv"
	"strings"
	"time"
)

// Period is a billing period. Periods have fixed lengths in seconds so that
// billing is exact arithmetic: a month is 730 hours, the convention AWS,
// Azure and GCP use to turn hourly rates into monthly ones.
type Period string

// The billing periods.
const (
	Second Period = "second"
	Minute Period = "minute"
	Hour   Period = "hour"
	Day    Period = "day"
	Week   Period = "week"
	Month  Period = "month"
)

// Periods lists the periods from shortest to longest.
var Periods = []Period{Second, Minute, Hour, Day, Week, Month}

// Seconds returns the length of p, or 0 for an unknown period.
func (p Period) Seconds() int64 {
	switch p {
	case Second:
		return 1
	case Minute:
		return 60
	case Hour:
		return 3600
	case Day:
		return 86400
	case Week:
		return 7 * 86400
	case Month:
		return 730 * 3600
	}
	return 0
}

// Duration returns the length of p.
func (p Period) Duration() time.Duration { return time.Duration(p.Seconds()) * time.Second }

// ParsePeriod accepts a period name ("hour", also "hourly", "h").
func ParsePeriod(s string) (Period, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "second", "seconds", "s", "sec", "per-second":
		return Second, nil
	case "minute", "minutes", "min", "m", "per-minute":
		return Minute, nil
	case "hour", "hours", "hourly", "h", "hr":
		return Hour, nil
	case "day", "days", "daily", "d":
		return Day, nil
	case "week", "weeks", "weekly", "w":
		return Week, nil
	case "month", "months", "monthly", "mo":
		return Month, nil
	}
	return "", &FieldError{Field: "period", Value: s, Allowed: "one of second, minute, hour, day, week, month"}
}

// ParseSpan parses a length of time as a period name ("hour"), a count of
// periods ("3 months", "2w"), a Go duration ("90s", "1h30m") or plain
// seconds ("60"). It returns whole seconds, which must be positive.
func ParseSpan(s string) (int64, error) {
	t := strings.TrimSpace(s)
	bad := &FieldError{Field: "duration", Value: s, Allowed: `a period name (hour), a count of periods (3 months), a Go duration (90s) or whole seconds`}
	if t == "" {
		return 0, bad
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n <= 0 {
			return 0, bad
		}
		return n, nil
	}
	if p, err := ParsePeriod(t); err == nil {
		return p.Seconds(), nil
	}
	num, unit := splitCount(t)
	if num != "" && unit != "" {
		if n, err := strconv.ParseInt(num, 10, 64); err == nil && n > 0 && n < 1<<31 {
			if p, err := ParsePeriod(unit); err == nil {
				return n * p.Seconds(), nil
			}
		}
	}
	if d, err := time.ParseDuration(t); err == nil && d > 0 && d%time.Second == 0 {
		return int64(d / time.Second), nil
	}
	return 0, bad
}

func splitCount(t string) (num, unit string) {
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	return t[:i], strings.TrimSpace(t[i:])
}
