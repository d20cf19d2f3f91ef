package core

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"ml", true},
		{"train-1", true},
		{"job-0123456789abcdef", true},
		{"a", true},
		{"Alice.Smith_2@lab", true},
		{strings.Repeat("x", MaxNameLen), true},
		{"", false},
		{strings.Repeat("x", MaxNameLen+1), false},
		{"a/b", false},
		{"..", false},
		{"a..b", false},
		{"../etc", false},
		{"a b", false},
		{"a\nb", false},
		{"a\tb", false},
		{"a\x00b", false},
		{"a#1", false},
		{"=HYPERLINK(1)", false},
		{"+1", false},
		{"-x", false},
		{"@x", false},
		{"x-", false},
		{"é", false},
		{"a%2fb", false},
	} {
		err := CheckName("id", tc.v)
		if (err == nil) != tc.ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", tc.v, err, tc.ok)
		}
		var fe *FieldError
		if err != nil && (!errors.As(err, &fe) || fe.Field != "id" || !strings.Contains(err.Error(), NameRule)) {
			t.Errorf("CheckName(%q) = %v, want a FieldError for id quoting the rule", tc.v, err)
		}
	}
}

// FuzzCheckName: an accepted name is plain ASCII that no path, key,
// header or CSV reader can misread.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"ml", "a/b", "a..b", "x y", "=1", "a#b", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if CheckName("f", v) != nil {
			return
		}
		if v == "" || len(v) > MaxNameLen || strings.Contains(v, "..") || strings.ContainsAny(v, "/\\#?%&=+ \t\r\n\x00\"'") {
			t.Fatalf("accepted %q", v)
		}
		for _, c := range []byte(v) {
			if c < 0x21 || c > 0x7e {
				t.Fatalf("accepted %q with byte %#x", v, c)
			}
		}
		if first := v[0]; first == '-' || first == '@' || first == '.' {
			t.Fatalf("accepted %q starting with %q", v, first)
		}
	})
}

func TestSeconds(t *testing.T) {
	maxS := int64(MaxJobDuration / time.Second)
	for _, tc := range []struct {
		v    int64
		want time.Duration
		ok   bool
	}{
		{0, 0, true},
		{90, 90 * time.Second, true},
		{maxS, MaxJobDuration, true},
		{maxS + 1, 0, false},
		{-1, 0, false},
		{1 << 62, 0, false}, // 2^62 s in ns wraps to 0 without the check
	} {
		got, err := Seconds("checkpoint_interval_seconds", tc.v)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Seconds(%d) = %v, %v; want %v, ok %v", tc.v, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "checkpoint_interval_seconds") {
			t.Errorf("Seconds(%d): %v does not name the field", tc.v, err)
		}
	}
}
