package gpuutil

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		relative bool
		want     map[string][]Point
	}{
		{"fractions, seconds", "id,time,utilization\nj1,0,0\nj1,60,0.5\nj2,0,1\n", true, map[string][]Point{
			"j1": {{Line: 2}, {Offset: time.Minute, BP: 5000, Line: 3}},
			"j2": {{BP: 10000, Line: 4}},
		}},
		{"percentages, RFC 3339, any column order, comments, BOM, spaces",
			"\ufeff# from dcgm\nutilization, ID ,Time\n\n35%, pod-a ,2026-03-02T08:00:00Z\n 35.555% ,pod-a,2026-03-02T09:00:00+01:00\n0%,pod-a,2026-03-02T08:05:00Z\n", false, map[string][]Point{
				"pod-a": {{At: t0, BP: 3500, Line: 4}, {At: time.Date(2026, 3, 2, 9, 0, 0, 0, time.FixedZone("", 3600)), BP: 3556, Line: 5}, {At: t0.Add(5 * time.Minute), Line: 6}},
			}},
		{"header only", "id,time,utilization\n", false, map[string][]Point{}},
		{"equal times", "id,time,utilization\na,5,0.1\na,5,0.2\n", true, map[string][]Point{"a": {{Offset: 5 * time.Second, BP: 1000, Line: 2}, {Offset: 5 * time.Second, BP: 2000, Line: 3}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("u.csv", strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.byID); diff != "" {
				t.Errorf("points (-want +got):\n%s", diff)
			}
			if s.Relative != tc.relative || s.File != "u.csv" {
				t.Errorf("Relative, File = %v, %q; want %v, u.csv", s.Relative, s.File, tc.relative)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const h = "id,time,utilization\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", `u.csv: no header: want a header line: id,time,utilization`},
		{"unknown column", "id,time,util\n", `u.csv:1: column 3: unknown column "util": want the columns id, time, utilization`},
		{"duplicate column", "id,time,utilization,id\n", `u.csv:1: column 4 (id): duplicate column "id": want each column once (column 1 is id)`},
		{"missing column", "id,time\n", `u.csv:1: utilization: missing column: want a header naming id, time and utilization`},
		{"fields", h + "a,1\n", `u.csv:2: wrong number of fields "2": want 3, as in the header`},
		{"empty id", h + ",1,0.5\n", `u.csv:2: column 1 (id): invalid value "": want a job or pod id (1..256 bytes, no control characters)`},
		{"bad time", h + "a,soon,0.5\n", `u.csv:2: column 2 (time): invalid value "soon": want an RFC 3339 time ("2026-03-01T08:00:00Z") or whole seconds from the job's first start ("300")`},
		{"negative seconds", h + "a,-5,0.5\n", `u.csv:2: column 2 (time): invalid value "-5": want whole seconds from the job's first start, 0..3162240000`},
		{"mixed forms", h + "a,5,0.5\nb,2026-03-02T08:00:00Z,0.5\n", `u.csv:3: column 2 (time): mixed time forms "2026-03-02T08:00:00Z": want seconds from the job's first start, as on line 2`},
		{"back in time", h + "a,60,0.5\nb,0,0.5\na,30,0.5\n", `u.csv:4: column 2 (time): time goes back "30": want a time at or after line 2's, the previous reading of a`},
		{"fraction over one", h + "a,0,35\n", `u.csv:2: column 3 (utilization): invalid value "35": want a fraction 0..1 ("0.35") or a percentage 0%..100% ("35%")`},
		{"percent over 100", h + "a,0,100.01%\n", `u.csv:2: column 3 (utilization): invalid value "100.01%": want a fraction 0..1 ("0.35") or a percentage 0%..100% ("35%")`},
		{"negative", h + "a,0,-0.1\n", `u.csv:2: column 3 (utilization): invalid value "-0.1": want a fraction 0..1 ("0.35") or a percentage 0%..100% ("35%")`},
		{"NaN", h + "a,0,NaN\n", `u.csv:2: column 3 (utilization): invalid value "NaN": want a fraction 0..1 ("0.35") or a percentage 0%..100% ("35%")`},
		{"hex", h + "a,0,0x1p-2\n", `u.csv:2: column 3 (utilization): invalid value "0x1p-2": want a fraction 0..1 ("0.35") or a percentage 0%..100% ("35%")`},
		{"empty value", h + "a,0,\n", `u.csv:2: column 3 (utilization): invalid value "": want a fraction 0..1 ("0.35") or a percentage 0%..100% ("35%")`},
		{"bad quote", h + "a,0,\"0.5\n", `u.csv:2: malformed CSV at character 10: want RFC 4180 CSV`},
		{"not UTF-8", h + "a,0,\xff\n", `u.csv: not UTF-8 text: want a CSV file in UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("u.csv", strings.NewReader(tc.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if got := strings.SplitN(err.Error(), ": extraneous", 2)[0]; !strings.HasPrefix(got, tc.want) {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestBusyAndAt(t *testing.T) {
	s, err := Parse("u.csv", strings.NewReader("id,time,utilization\nj,0,0\nj,600,100%\nj,900,0.2\n"))
	if err != nil {
		t.Fatal(err)
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	// 0-10 min at 0, 10-15 at 100%, 15- at 20%.
	for _, tc := range []struct {
		from, to int
		want     int64 // busy seconds
	}{
		{0, 10, 0}, {0, 15, 300}, {0, 25, 300 + 120}, {12, 13, 60}, {-10, 0, 0}, {30, 40, 120}, {5, 5, 0},
	} {
		got, ok := s.Busy("j", t0, at(tc.from), at(tc.to))
		if !ok || got != tc.want*1000*10000 {
			t.Errorf("Busy [%d, %d) min = %d bp·ms (ok %v), want %d busy seconds", tc.from, tc.to, got, ok, tc.want)
		}
	}
	for m, want := range map[int]int{-1: 0, 0: 0, 10: 10000, 14: 10000, 15: 2000, 100: 2000} {
		if got, _ := s.At("j", t0, at(m)); got != want {
			t.Errorf("At(%d min) = %d, want %d", m, got, want)
		}
	}
	if _, ok := s.Busy("other", t0, t0, at(1)); ok {
		t.Error("Busy of an id without readings is ok")
	}
}

// Busy is additive over adjacent intervals and never more than the
// interval's length.
func TestPropertyBusy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		b.WriteString("id,time,utilization\n")
		n := rapid.IntRange(1, 30).Draw(t, "n")
		sec := 0
		for range n {
			sec += rapid.IntRange(0, 900).Draw(t, "gap")
			b.WriteString("j," + itoa(sec) + "," + itoa(rapid.IntRange(0, 100).Draw(t, "pct")) + "%\n")
		}
		s, err := Parse("p.csv", strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		a := rapid.IntRange(-1000, 20000).Draw(t, "a")
		m := rapid.IntRange(a, 30000).Draw(t, "m")
		z := rapid.IntRange(m, 40000).Draw(t, "z")
		ts := func(x int) time.Time { return t0.Add(time.Duration(x) * time.Second) }
		whole, _ := s.Busy("j", t0, ts(a), ts(z))
		left, _ := s.Busy("j", t0, ts(a), ts(m))
		right, _ := s.Busy("j", t0, ts(m), ts(z))
		if whole != left+right {
			t.Fatalf("Busy not additive: %d != %d + %d", whole, left, right)
		}
		if whole < 0 || whole > int64(z-a)*1000*10000 {
			t.Fatalf("Busy %d outside 0..%d", whole, int64(z-a)*1000*10000)
		}
	})
}

func itoa(i int) string { return strconv.Itoa(i) }

// FuzzParse: any input either parses into readings whose utilization is
// within 0..10000 basis points and whose times never go back within an
// id, or fails with a *ParseError.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"id,time,utilization\nj1,0,0\nj1,60,0.5\n",
		"utilization,id,time\n35%,pod,2026-03-02T08:00:00Z\n",
		"id,time,utilization\na,5,1\nb,2,100%\na,4,0\n",
		"id,time,utilization\n\"a,b\",0,\"0.25\"\n# comment\n\n",
		"id,time,utilization\na,0,1e-3\na,1,0x1p-2\n",
		"id,time\n",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse("f.csv", strings.NewReader(in))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is %T, want *ParseError", err, err)
			}
			return
		}
		for _, id := range s.IDs() {
			pts := s.Points(id)
			for i, p := range pts {
				if p.BP < 0 || p.BP > 10000 {
					t.Fatalf("%s line %d: %d bp", id, p.Line, p.BP)
				}
				if i > 0 && p.before(pts[i-1]) {
					t.Fatalf("%s line %d goes back", id, p.Line)
				}
			}
			if b, ok := s.Busy(id, t0, t0, t0.Add(time.Hour)); !ok || b < 0 || b > 3600*1000*10000 {
				t.Fatalf("%s: Busy over an hour = %d", id, b)
			}
		}
	})
}
