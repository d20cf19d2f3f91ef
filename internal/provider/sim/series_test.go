package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

func TestParseAvailability(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Step
	}{
		{"seconds", "time,offer,available\n0,*,1\n600,aws/r/gpu1,0\n600,aws/r/gpu1,1\n",
			[]Step{
				{Relative: true, Offer: "*", Available: true, Line: 2},
				{Relative: true, Offset: 10 * time.Minute, Offer: "aws/r/gpu1", Line: 3},
				{Relative: true, Offset: 10 * time.Minute, Offer: "aws/r/gpu1", Available: true, Line: 4},
			}},
		{"rfc3339, columns in any order, comments, blank lines, BOM, spaces",
			"\ufeff# availability\navailable, Offer ,TIME\n\n0, x ,2026-03-02T08:00:00Z\n1,x,2026-03-02T10:00:00+01:00\n",
			[]Step{
				{At: t0, Offer: "x", Line: 4},
				{At: time.Date(2026, 3, 2, 10, 0, 0, 0, time.FixedZone("", 3600)), Offer: "x", Available: true, Line: 5},
			}},
		{"quoted", "time,offer,available\n\"5\",\"a,b\",\"0\"\n",
			[]Step{{Relative: true, Offset: 5 * time.Second, Offer: "a,b", Line: 2}}},
		{"header only", "time,offer,available\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAvailability("a.csv", strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, a.Steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if a.File != "a.csv" {
				t.Errorf("File = %q", a.File)
			}
		})
	}
}

func TestParseAvailabilityErrors(t *testing.T) {
	const h = "time,offer,available\n"
	tests := []struct {
		name string
		in   string
		want string
		err  SeriesError // the fields checked: Line, Column, Field, Value
	}{
		{"empty", "", `a.csv: no header: want a header line: time,offer,available`, SeriesError{}},
		{"unknown column", "time,offer,avail\n", `a.csv:1: column 3: unknown column "avail": want the columns time, offer, available`,
			SeriesError{Line: 1, Column: 3, Value: "avail"}},
		{"duplicate column", "time,offer,time,available\n", `a.csv:1: column 3 (time): duplicate column "time": want each column once (column 1 is time)`,
			SeriesError{Line: 1, Column: 3, Field: "time", Value: "time"}},
		{"missing column", "time,offer\n", `a.csv:1: available: missing column: want a header naming time, offer and available`,
			SeriesError{Line: 1, Field: "available"}},
		{"available", h + "0,x,1\n60,x,2\n", `a.csv:3: column 3 (available): invalid value "2": want 1 (available) or 0 (withdrawn)`,
			SeriesError{Line: 3, Column: 3, Field: "available", Value: "2"}},
		{"available yes", h + "0,x,yes\n", `column 3 (available): invalid value "yes"`, SeriesError{Line: 2, Column: 3, Field: "available", Value: "yes"}},
		{"time", h + "soon,x,1\n", `a.csv:2: column 1 (time): invalid value "soon": want an RFC 3339 time ("2026-03-01T08:00:00Z") or whole seconds from start ("3600")`,
			SeriesError{Line: 2, Column: 1, Field: "time", Value: "soon"}},
		{"negative seconds", h + "-5,x,1\n", `a.csv:2: column 1 (time): invalid value "-5": want whole seconds from start, 0..`,
			SeriesError{Line: 2, Column: 1, Field: "time", Value: "-5"}},
		{"fractional seconds", h + "1.5,x,1\n", `column 1 (time): invalid value "1.5"`, SeriesError{Line: 2, Column: 1, Field: "time", Value: "1.5"}},
		{"mixed forms", h + "0,x,1\n2026-03-02T08:00:00Z,x,0\n", `a.csv:3: column 1 (time): mixed time forms "2026-03-02T08:00:00Z": want seconds from start, as on line 2`,
			SeriesError{Line: 3, Column: 1, Field: "time", Value: "2026-03-02T08:00:00Z"}},
		{"goes back", h + "60,x,1\n59,x,0\n", `a.csv:3: column 1 (time): time goes back "59": want a time at or after line 2's`,
			SeriesError{Line: 3, Column: 1, Field: "time", Value: "59"}},
		{"goes back rfc3339", h + "2026-03-02T09:00:00Z,x,1\n2026-03-02T09:30:00+01:00,x,0\n", `time goes back`,
			SeriesError{Line: 3, Column: 1, Field: "time", Value: "2026-03-02T09:30:00+01:00"}},
		{"empty offer", h + "0, ,1\n", `a.csv:2: column 2 (offer): invalid value " ": want an offer id`,
			SeriesError{Line: 2, Column: 2, Field: "offer", Value: " "}},
		{"field count", h + "0,x\n", `a.csv:2: wrong number of fields "2": want 3, as in the header`, SeriesError{Line: 2, Value: "2"}},
		{"bad quote", h + "0,\"x,1\n", `a.csv:2: malformed CSV at character`, SeriesError{Line: 2}},
		{"not utf-8", h + "0,\xff,1\n", `a.csv: not UTF-8 text`, SeriesError{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseAvailability("a.csv", strings.NewReader(tc.in))
			var se *SeriesError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SeriesError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n  %s\ndoes not say\n  %s", err, tc.want)
			}
			got := SeriesError{Line: se.Line, Column: se.Column, Field: se.Field, Value: se.Value}
			if diff := cmp.Diff(tc.err, got); diff != "" {
				t.Errorf("error fields (-want +got):\n%s", diff)
			}
			if se.File != "a.csv" {
				t.Errorf("File = %q", se.File)
			}
		})
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestParseAvailabilityReadError(t *testing.T) {
	_, err := ParseAvailability("a.csv", failingReader{})
	if err == nil || !strings.Contains(err.Error(), "a.csv: cannot read (disk on fire)") {
		t.Errorf("error = %v", err)
	}
}

// FuzzParseAvailability: the parser never panics; what it accepts is in
// time order, of one time form, with valid offers; what it rejects is a
// *SeriesError naming the file.
func FuzzParseAvailability(f *testing.F) {
	for _, s := range []string{
		"time,offer,available\n0,*,1\n600,aws/r/gpu1,0\n",
		"offer,available,time\nx,0,2026-03-02T08:00:00Z\nx,1,2026-03-02T09:00:00.5+08:00\n",
		"time,offer,available\n60,x,1\n59,x,0\n",
		"time,offer,available\n0,x,1\n2026-03-02T08:00:00Z,x,0\n",
		"# c\n\ufefftime,offer,available\n\"1\",\"a\"\"b\",1\n",
		"time,offer\n",
		"time,offer,available\n0,\"x,1\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseAvailability("f.csv", strings.NewReader(string(data)))
		if err != nil {
			var se *SeriesError
			if !errors.As(err, &se) || se.File != "f.csv" || !strings.HasPrefix(err.Error(), "f.csv") {
				t.Fatalf("error %q is not a SeriesError naming the file", err)
			}
			return
		}
		for i, s := range a.Steps {
			if s.Offer == "" || s.Line < 1 {
				t.Fatalf("step %d: %+v", i, s)
			}
			if i == 0 {
				continue
			}
			p := a.Steps[i-1]
			if p.Relative != s.Relative || s.Line <= p.Line {
				t.Fatalf("steps %d, %d: %+v, %+v", i-1, i, p, s)
			}
			if s.at(t0).Before(p.at(t0)) {
				t.Fatalf("step %d goes back: %+v after %+v", i, s, p)
			}
		}
		// Whatever parses, a Cloud can schedule (with every offer known).
		var offers []core.Offer
		seen := map[string]bool{}
		for _, s := range a.Steps {
			if s.Offer != AllOffers && !seen[s.Offer] {
				seen[s.Offer] = true
				offers = append(offers, core.Offer{ID: s.Offer, Provider: "p", Plans: []core.PricePlan{{Mode: core.Spot}}})
			}
		}
		if len(offers) > 50 {
			return
		}
		w := newWorld(t, 1, Config{Offers: offers, Availability: a})
		w.at(200 * 366 * 24 * time.Hour)
		w.poll()
	})
}

func TestAvailabilitySeries(t *testing.T) {
	series := `time,offer,available
0,*,1
600,aws/r/gpu1,0
600,aws/r/bare,0
600,aws/r/bare,1
1200,*,1
1200,*,1
`
	a, err := ParseAvailability("a.csv", strings.NewReader(series))
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, 1, Config{Availability: a, Default: Settings{Delay: Fixed(5 * time.Minute)}})
	w.acquire("a", gpuOffer, core.Spot)     // ready at +5m, notice at +10m
	w.acquire("b", gpuOffer, core.OnDemand) // not spot: untouched
	w.acquire("c", bareSpot, core.Spot)     // withdrawn and back at the same time: untouched
	if got, ok := w.cloud.NextEventAt(); !ok || !got.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("NextEventAt = +%v, want +5m", got.Sub(t0))
	}
	w.at(8 * time.Minute)
	w.acquire("d", gpuOffer, core.Spot) // still provisioning at the withdrawal
	w.at(10*time.Minute + 30*time.Second)
	want := []string{
		"+5m0s sim-000001 ready",
		"+5m0s sim-000002 ready",
		"+5m0s sim-000003 ready",
		"+10m0s sim-000001 reclaiming at +12m0s",
		"+10m0s sim-000004 reclaiming at +12m0s",
	}
	if diff := cmp.Diff(want, w.poll()); diff != "" {
		t.Errorf("poll at +10m30s (-want +got):\n%s", diff)
	}
	if w.cloud.Available(gpuOffer) || !w.cloud.Available(bareSpot) {
		t.Errorf("Available: %s %v, %s %v", gpuOffer, w.cloud.Available(gpuOffer), bareSpot, w.cloud.Available(bareSpot))
	}
	if _, err := w.cloud.Acquire(t.Context(), provider.AcquireRequest{ClientToken: "e", OfferID: gpuOffer, Mode: core.Spot}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("spot acquire while withdrawn = %v, want ErrCapacity", err)
	}
	w.acquire("f", gpuOffer, core.OnDemand)
	w.at(19 * time.Minute)
	want = []string{"+12m0s sim-000001 reclaimed", "+12m0s sim-000004 reclaimed", "+15m30s sim-000005 ready"}
	if diff := cmp.Diff(want, w.poll()); diff != "" {
		t.Errorf("poll at +19m (-want +got):\n%s", diff)
	}
	if got, ok := w.cloud.NextEventAt(); !ok || !got.Equal(t0.Add(20*time.Minute)) {
		t.Errorf("NextEventAt = +%v, %v; want +20m, the return of spot", got.Sub(t0), ok)
	}
	w.at(20 * time.Minute)
	w.acquire("g", gpuOffer, core.Spot)
	// The series replaces the plan's 25% monthly rate: nothing is
	// reclaimed in a year.
	w.at(365 * 24 * time.Hour)
	if diff := cmp.Diff([]string{"+25m0s sim-000006 ready"}, w.poll()); diff != "" {
		t.Errorf("poll at a year (-want +got):\n%s", diff)
	}
}

func TestAvailabilitySeriesStart(t *testing.T) {
	a := &Availability{Steps: []Step{{Relative: true, Offset: time.Hour, Offer: gpuOffer}}}
	w := newWorld(t, 1, Config{Availability: a, SeriesStart: t0.Add(-30 * time.Minute)})
	w.acquire("a", gpuOffer, core.Spot)
	if at, _ := w.cloud.NextEventAt(); !at.Equal(t0) {
		t.Errorf("NextEventAt = %v, want the ready at t0", at)
	}
	w.poll()
	if at, _ := w.cloud.NextEventAt(); !at.Equal(t0.Add(30 * time.Minute)) {
		t.Errorf("NextEventAt = +%v, want +30m (an hour after SeriesStart)", at.Sub(t0))
	}
	// RFC 3339 steps in the past apply at once.
	a = &Availability{Steps: []Step{{At: t0.Add(-time.Hour), Offer: AllOffers}}}
	w = newWorld(t, 1, Config{Availability: a})
	if _, err := w.cloud.Acquire(t.Context(), provider.AcquireRequest{ClientToken: "a", OfferID: bareSpot, Mode: core.Spot}); !errors.Is(err, provider.ErrCapacity) {
		t.Errorf("Acquire = %v, want ErrCapacity: the offer was withdrawn an hour ago", err)
	}
}
