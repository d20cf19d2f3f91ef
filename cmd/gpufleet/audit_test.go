package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/audit/audittest"
	"github.com/gpufleet/gpufleet/internal/pricing"
	"github.com/gpufleet/gpufleet/internal/store/sqlite"
)

// seededAuditStore writes the audit's fixed workload to a SQLite file and
// its catalog to a YAML file.
func seededAuditStore(t *testing.T) (db, catalog string) {
	t.Helper()
	dir := t.TempDir()
	db, catalog = filepath.Join(dir, "fleet.db"), filepath.Join(dir, "catalog.yaml")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := audittest.Seed(ctx, st, audittest.Workload()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(catalog)
	if err != nil {
		t.Fatal(err)
	}
	if err := pricing.WriteYAML(f, &pricing.Catalog{Currency: "USD", Offers: audittest.Catalog()}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return db, catalog
}

func TestReportAuditJSON(t *testing.T) {
	db, cat := seededAuditStore(t)
	code, out, errs := runCLI(t, "report", "audit", "--from", "2026-11", "--to", "2026-12", "--db", db, "--catalog", cat,
		"--as-of", "2026-12-01T00:00:00Z", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v struct {
		Saving          json.Number `json:"saving"`
		Recommendations []struct {
			ID     string      `json:"id"`
			Saving json.Number `json:"saving"`
		} `json:"recommendations"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The same figures as the engine's golden test: the CLI reads the
	// store and audits it the same way.
	want, err := os.ReadFile(filepath.Join("..", "..", "internal", "report", "testdata", "audit_month.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("report audit --format json differs from internal/report/testdata/audit_month.json:\n%s", out)
	}
	if v.Saving != "4145.00548" || len(v.Recommendations) != 5 {
		t.Errorf("saving %s, %d recommendations", v.Saving, len(v.Recommendations))
	}
}

func TestReportAuditFileAndTeam(t *testing.T) {
	db, cat := seededAuditStore(t)
	out := filepath.Join(t.TempDir(), "audit.html")
	code, _, errs := runCLI(t, "report", "audit", "--from", "2026-11-01", "--to", "2026-12-01", "--team", "vision", "--db", db, "--catalog", cat,
		"--as-of", "2026-12-01T00:00:00Z", "--format", "html", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "team vision") || !strings.Contains(s, "infer-h100") || strings.Contains(s, "gang-8") || strings.Contains(s, "(idle)") {
		t.Errorf("team report shows another team's data or lacks its own")
	}
	code, csvOut, errs := runCLI(t, "report", "audit", "--from", "2026-11", "--to", "2026-12", "--db", db, "--catalog", cat, "--as-of", "2026-12-01T00:00:00Z", "--format", "csv")
	if code != 0 || !strings.HasPrefix(csvOut, "record,period,team") {
		t.Errorf("csv: exit %d %s: %.200s", code, errs, csvOut)
	}
}

func TestReportAuditErrors(t *testing.T) {
	db, cat := seededAuditStore(t)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--to", "2026-12"}, 2, "--from and --to are required"},
		{[]string{"--from", "last month", "--to", "2026-12"}, 2, `--from: invalid value "last month"`},
		{[]string{"--from", "2026-11", "--to", "2026-12", "--format", "pdf"}, 2, `--format: invalid value "pdf"`},
		{[]string{"--from", "2026-11", "--to", "2026-12", "--period", "year"}, 2, `--period: invalid value "year"`},
		{[]string{"--from", "2026-11", "--to", "2026-12", "--tz", "Mars/Base"}, 2, `--tz: invalid value "Mars/Base"`},
		{[]string{"--from", "2026-12", "--to", "2026-11"}, 1, "to: invalid value"},
		{[]string{"--from", "2026-11", "--to", "2026-12", "--db", filepath.Join(t.TempDir(), "none.db")}, 1, "--db: no store at"},
	}
	for _, c := range cases {
		args := append([]string{"report", "audit", "--db", db, "--catalog", cat}, c.args...)
		code, _, errs := runCLI(t, args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}
