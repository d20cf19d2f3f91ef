package httpapi

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

func TestClientKey(t *testing.T) {
	for addr, want := range map[string]string{
		"198.51.100.7:40000":          "198.51.100.7",
		"[::ffff:198.51.100.7]:40000": "198.51.100.7",
		"[2001:db8:1:2:3:4:5:6]:443":  "2001:db8:1:2::/64",
		"[fe80::1%eth0]:443":          "fe80::/64",
		"@":                           "@",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if got := clientKey(r); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", addr, got, want)
		}
	}
}

// TestLimiterForgetsFullBuckets: a flood from many addresses leaves the
// limiter holding only the buckets of the last fill times, not one per
// address ever seen.
func TestLimiterForgetsFullBuckets(t *testing.T) {
	l := newLimiter(RateLimit{Rate: 10, Burst: 20}) // fills in 2 s
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10_000 {
		l.take(fmt.Sprint("addr-", i), now)
		now = now.Add(time.Millisecond)
	}
	now = now.Add(2 * time.Second)
	l.take("late", now)
	if n := len(l.buckets); n != 1 {
		t.Errorf("%d buckets after every other address's filled, want 1", n)
	}
}
