package core

import (
	"fmt"
	"strings"
	"time"
)

// MaxNameLen is the longest id CheckName accepts, in bytes.
const MaxNameLen = 128

// NameRule says in words what CheckName accepts; errors quote it.
const NameRule = "1..128 of A-Z a-z 0-9 . _ - @, starting and ending with a letter or digit, without '..'"

// CheckName validates an id a user chooses for a job, team or user. Such
// ids travel into URL paths (/jobs/{id}), unit keys ("job#shard"), event
// subjects, agent commands, log lines and CSV cells, so the rule keeps
// them to plain ASCII that none of those can misread: no '/', no '..', no
// whitespace or control characters, no '#', and no leading character a
// spreadsheet takes for a formula (=, +, -, @).
func CheckName(field, v string) error {
	if err := nameProblem(v); err != "" {
		shown := v
		if len(shown) > 64 {
			shown = shown[:61] + "..."
		}
		return &FieldError{Field: field, Value: shown, Allowed: NameRule + " (" + err + ")"}
	}
	return nil
}

func nameProblem(v string) string {
	switch {
	case v == "":
		return "empty"
	case len(v) > MaxNameLen:
		return fmt.Sprintf("%d bytes", len(v))
	case strings.Contains(v, ".."):
		return "contains '..'"
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if alnum {
			continue
		}
		if i == 0 || i == len(v)-1 {
			return fmt.Sprintf("%q at an end", c)
		}
		if c != '.' && c != '_' && c != '-' && c != '@' {
			return fmt.Sprintf("%q at byte %d", c, i)
		}
	}
	return ""
}

// MaxJobDuration bounds every duration of a job (estimated duration,
// checkpoint interval): a hundred years, far above any real job and far
// below time.Duration's limit (292 years), so that the sums and products
// the scheduler makes of them cannot overflow.
const MaxJobDuration = 100 * 365 * 24 * time.Hour

// Seconds converts a count of seconds from a request into a duration in
// 0..MaxJobDuration; outside that range (where the conversion to
// nanoseconds would overflow, 2^62 seconds becoming 0) it is a
// FieldError naming field.
func Seconds(field string, v int64) (time.Duration, error) {
	maxS := int64(MaxJobDuration / time.Second)
	if v < 0 || v > maxS {
		return 0, &FieldError{Field: field, Value: fmt.Sprint(v), Allowed: fmt.Sprintf("0..%d seconds (100 years)", maxS)}
	}
	return time.Duration(v) * time.Second, nil
}
