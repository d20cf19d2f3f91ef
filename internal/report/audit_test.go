package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/audit"
	"github.com/gpufleet/gpufleet/internal/audit/audittest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs from the golden file (-want +got; go test -update rewrites it):\n%s", name, d)
	}
}

func auditReport(t *testing.T, edit func(*audit.Input)) audit.Report {
	t.Helper()
	in := audittest.Workload()
	if edit != nil {
		edit(&in)
	}
	r, err := audit.Audit(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAuditGolden renders the fixed workload's audit, by month and by
// week and for one team, in the three formats.
func TestAuditGolden(t *testing.T) {
	cases := []struct {
		name string
		edit func(*audit.Input)
	}{
		{"audit_month", nil},
		{"audit_week", func(in *audit.Input) { in.Period = audit.Week }},
		{"audit_team_vision", func(in *audit.Input) { in.Team = "vision" }},
	}
	for _, c := range cases {
		r := auditReport(t, c.edit)
		var j, cs, h bytes.Buffer
		if err := WriteAuditJSON(&j, r); err != nil {
			t.Fatal(err)
		}
		if err := WriteAuditCSV(&cs, r); err != nil {
			t.Fatal(err)
		}
		if err := WriteAuditHTML(&h, r); err != nil {
			t.Fatal(err)
		}
		golden(t, c.name+".json", j.Bytes())
		golden(t, c.name+".csv", cs.Bytes())
		golden(t, c.name+".html", h.Bytes())
	}
}

// TestAuditJSONExact: money is an exact decimal in the JSON, never a
// float's rounding.
func TestAuditJSONExact(t *testing.T) {
	r := auditReport(t, nil)
	var b bytes.Buffer
	if err := WriteAuditJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Saving          json.Number `json:"saving"`
		Recommendations []struct {
			Kind   string      `json:"kind"`
			Saving json.Number `json:"saving"`
		} `json:"recommendations"`
	}
	dec := json.NewDecoder(&b)
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if v.Saving != "4145.00548" {
		t.Errorf("saving %s, want 4145.00548", v.Saving)
	}
	want := map[string]json.Number{"lease-change": "3345.20548", "right-size-count": "400", "model-downgrade": "360", "right-size-memory": "35", "off-peak": "4.8"}
	for _, x := range v.Recommendations {
		if want[x.Kind] != x.Saving {
			t.Errorf("%s: saving %s, want %s", x.Kind, x.Saving, want[x.Kind])
		}
	}
}

func TestAuditCSVShape(t *testing.T) {
	r := auditReport(t, nil)
	var b bytes.Buffer
	if err := WriteAuditCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, row := range rows[1:] {
		if len(row) != len(AuditCSVHeader) {
			t.Fatalf("row %v has %d fields, want %d", row, len(row), len(AuditCSVHeader))
		}
		count[row[0]]++
	}
	var lines int
	for _, p := range r.Periods {
		lines += len(p.Lines)
	}
	if count["recommendation"] != len(r.Recommendations) || count["line"] != lines || count["period"] != len(r.Periods) {
		t.Errorf("rows %v; want %d recommendations, %d lines, %d periods", count, len(r.Recommendations), lines, len(r.Periods))
	}
}

func TestAuditHTMLIsSelfContainedAndPrintable(t *testing.T) {
	r := auditReport(t, nil)
	var b bytes.Buffer
	if err := WriteAuditHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"<svg", "@media print", "right-size-memory", "3345.20548"} {
		if !strings.Contains(s, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "http://", "https://", "<link", "@import", "url("} {
		if strings.Contains(strings.ReplaceAll(s, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("HTML is not self-contained: it has %q", bad)
		}
	}
}

// TestAuditCSVNoFormulas: no text cell of the audit CSV starts with a
// character a spreadsheet reads as a formula, whatever the store held;
// such cells keep their text after a leading quote.
func TestAuditCSVNoFormulas(t *testing.T) {
	r := auditReport(t, nil)
	evil := []string{"=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"}
	r.Team = evil[0]
	jobs := 0
	for i := range r.Periods {
		p := &r.Periods[i]
		p.Label = evil[1]
		for k := range p.Lines {
			p.Lines[k].Team, p.Lines[k].GPUModel = evil[2], evil[3]
		}
		for k := range p.Jobs {
			p.Jobs[k].JobID, p.Jobs[k].Team, p.Jobs[k].GPUModel = evil[k%len(evil)], evil[4], evil[5]
			jobs++
		}
	}
	for k := range r.Recommendations {
		x := &r.Recommendations[k]
		x.Team, x.Subject, x.Action, x.ID, x.Period = evil[0], evil[1], evil[2], evil[3], evil[4]
	}
	if jobs == 0 || len(r.Recommendations) == 0 {
		t.Fatalf("the fixture has %d jobs and %d recommendations: nothing to check", jobs, len(r.Recommendations))
	}
	var b bytes.Buffer
	if err := WriteAuditCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	text := map[string]bool{"period": true, "team": true, "gpu_model": true, "subject": true, "kind": true, "action": true, "evidence": true, "id": true}
	quoted := 0
	for _, row := range rows[1:] {
		for i, cell := range row {
			if !text[AuditCSVHeader[i]] || cell == "" {
				continue
			}
			if strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("row %v: %s cell %q reads as a formula", row[0], AuditCSVHeader[i], cell)
			}
			if cell[0] == '\'' {
				quoted++
			}
		}
	}
	if quoted == 0 {
		t.Error("no cell was quoted")
	}
}
