package load_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/audit/audittest"
	"github.com/gpufleet/gpufleet/internal/audit/load"
	"github.com/gpufleet/gpufleet/internal/report"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// TestStoreRoundTrip: the fixed workload written to a SQLite store the
// way the loop writes it, loaded back, audits exactly as the workload
// itself.
func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	want := audittest.Workload()
	// One run still going: the store has it as a live unit, not a run.
	for i := range want.Runs {
		if want.Runs[i].JobID == "train-small" {
			want.Runs[i].To = time.Time{}
		}
	}
	if err := audittest.Seed(ctx, st, want); err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"", "vision", "research"} {
		want.Team = team
		in, err := load.Input(ctx, st, want.Offers, want.Currency, load.Query{From: want.From, To: want.To, Now: want.Now, Location: want.Location, Period: want.Period, Team: team})
		if err != nil {
			t.Fatal(err)
		}
		render := func(in audit.Input) string {
			r, err := audit.Audit(in)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := report.WriteAuditJSON(&b, r); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
		if d := cmp.Diff(render(want), render(in)); d != "" {
			t.Errorf("team %q: the audit from the store differs (-workload +store):\n%s", team, d)
		}
	}
}
