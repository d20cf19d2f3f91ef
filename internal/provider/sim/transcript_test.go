package sim

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current behaviour")

// TestTranscript replays testdata/transcript.txt, a script of calls, and
// compares the log of calls, results and events with
// testdata/transcript.golden. Review the diff of a rewritten golden file:
// it is the behaviour change.
func TestTranscript(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "availability.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := ParseAvailability("availability.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	offers := testOffers()
	offers[0].Plans[1].Reclaim.MonthlyRateBP = 9900
	w := newWorld(t, 42, Config{
		Offers:       offers,
		Default:      Settings{Delay: LogNormal(2*time.Minute, 5*time.Minute)},
		ByProvider:   map[string]Settings{"aws": {FailureBP: new(int64(1000))}, "idc": {Delay: Uniform(10*time.Minute, 30*time.Minute), Capacity: 2}},
		Availability: a,
	})
	script, err := os.ReadFile(filepath.Join("testdata", "transcript.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got := transcript(t, w, string(script))

	golden := filepath.Join("testdata", "transcript.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestTranscript -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("transcript differs from %s (-want +got); rerun with -update if the change is intended:\n%s", golden, diff)
	}
}

// transcript runs a script's commands (at, acquire, release, poll, list,
// next, run, stats) and returns what they printed.
func transcript(t *testing.T, w *world, script string) []byte {
	ctx := context.Background()
	var out bytes.Buffer
	ts := func(at time.Time) string { return "+" + at.Sub(t0).String() }
	printEvents := func(evs []provider.Event) {
		for _, e := range evs {
			fmt.Fprintf(&out, "  event %s\n", line(e))
		}
	}
	sc := bufio.NewScanner(strings.NewReader(script))
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		fmt.Fprintf(&out, "%s %s\n", ts(w.clk.Now()), text)
		bad := func() { t.Fatalf("transcript.txt:%d: bad command %q", n, text) }
		switch f[0] {
		case "at":
			d, err := time.ParseDuration(f[1])
			if len(f) != 2 || err != nil {
				bad()
			}
			w.at(d)
		case "acquire":
			if len(f) != 4 {
				bad()
			}
			m, err := w.cloud.Acquire(ctx, provider.AcquireRequest{ClientToken: f[1], OfferID: f[2], Mode: core.BillingMode(f[3])})
			if err != nil {
				fmt.Fprintf(&out, "  error: %v\n", err)
				continue
			}
			fmt.Fprintf(&out, "  -> %s %s\n", m.ProviderID, m.State)
		case "release":
			if len(f) != 2 {
				bad()
			}
			if err := w.cloud.Release(ctx, f[1]); err != nil {
				fmt.Fprintf(&out, "  error: %v\n", err)
			}
		case "poll":
			evs, err := w.cloud.Poll(ctx, w.clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			printEvents(evs)
		case "list":
			ms, err := w.cloud.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				fmt.Fprintf(&out, "  %s %s %s %s launched %s", m.ProviderID, m.ClientToken, m.OfferID, m.Mode, ts(m.LaunchedAt))
				if !m.ReadyAt.IsZero() {
					fmt.Fprintf(&out, " ready %s", ts(m.ReadyAt))
				}
				if !m.EndedAt.IsZero() {
					fmt.Fprintf(&out, " ended %s", ts(m.EndedAt))
				}
				fmt.Fprintf(&out, " %s\n", m.State)
			}
		case "next":
			if at, ok := w.cloud.NextEventAt(); ok {
				fmt.Fprintf(&out, "  %s\n", ts(at))
			} else {
				fmt.Fprintf(&out, "  none\n")
			}
		case "run":
			// Jump from event to event, as the simulator does.
			d, err := time.ParseDuration(f[1])
			if len(f) != 2 || err != nil {
				bad()
			}
			end := t0.Add(d)
			for {
				at, ok := w.cloud.NextEventAt()
				if !ok || at.After(end) {
					break
				}
				if at.After(w.clk.Now()) {
					w.clk.Set(at)
				}
				evs, err := w.cloud.Poll(ctx, w.clk.Now())
				if err != nil {
					t.Fatal(err)
				}
				printEvents(evs)
			}
			w.clk.Set(end)
		case "stats":
			fmt.Fprintf(&out, "  %+v\n", w.cloud.Stats())
		default:
			bad()
		}
	}
	return out.Bytes()
}
