package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/pricing"
)

const awsPrices = "../../../shared/data/aws-gpu-pricing-vantage/aws_gpu_prices_linux.csv"

func TestCatalogImportAWSAndList(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "catalog.yaml")
	code, stdout, stderr := runCLI(t, "catalog", "import", "--from", "aws-csv", awsPrices, "-o", out)
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("import with -o wrote to stdout: %q", stdout)
	}
	want := "imported 1127 offers (1127 on-demand, 872 spot, 785 monthly plans), 0 vouchers, in USD from " + awsPrices + " to " + out + "\n"
	if stderr != want {
		t.Errorf("summary %q\n want %q", stderr, want)
	}
	c, err := pricing.Load(out)
	if err != nil || len(c.Offers) != 1127 {
		t.Fatalf("written catalog: %v", err)
	}

	code, stdout, stderr = runCLI(t, "catalog", "list", "--catalog", out, "--gpu", "A100", "--region", "us-east-1", "--json")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	var offers []struct {
		ID        string `json:"id"`
		GPUModel  string `json:"gpu_model"`
		GPUs      int    `json:"gpus"`
		GPUMemMiB int64  `json:"gpu_memory_mib"`
		Currency  string `json:"currency"`
		Plans     []struct {
			Mode        string      `json:"mode"`
			Price       json.Number `json:"price"`
			Per         string      `json:"per"`
			Granularity int64       `json:"granularity_seconds"`
			MinCharge   int64       `json:"min_charge_seconds"`
			Term        int64       `json:"term_seconds"`
			Hourly      json.Number `json:"hourly_equivalent"`
			Reclaim     *struct {
				Bucket string `json:"bucket"`
				RateBP int64  `json:"monthly_rate_bp"`
				Notice int64  `json:"notice_seconds"`
			} `json:"reclaim"`
		} `json:"plans"`
	}
	if err := json.Unmarshal([]byte(stdout), &offers); err != nil {
		t.Fatalf("list --json: %v\n%s", err, stdout)
	}
	var ids []string
	for _, o := range offers {
		ids = append(ids, o.ID)
	}
	if got := strings.Join(ids, " "); got != "aws/us-east-1/p4d.24xlarge aws/us-east-1/p4de.24xlarge" {
		t.Fatalf("A100 offers in us-east-1: %s", got)
	}
	p4d := offers[0]
	if p4d.GPUModel != "NVIDIA A100" || p4d.GPUs != 8 || p4d.GPUMemMiB != 40960 || p4d.Currency != "USD" || len(p4d.Plans) != 3 {
		t.Errorf("p4d %+v", p4d)
	}
	od, spot, mo := p4d.Plans[0], p4d.Plans[1], p4d.Plans[2]
	if od.Mode != "on-demand" || od.Price != "21.957642" || od.Per != "hour" || od.Granularity != 1 || od.MinCharge != 60 {
		t.Errorf("on-demand %+v", od)
	}
	if spot.Mode != "spot" || spot.Price != "8.59075" || spot.Reclaim == nil || spot.Reclaim.Bucket != ">20%" || spot.Reclaim.RateBP != 2500 || spot.Reclaim.Notice != 120 {
		t.Errorf("spot %+v", spot)
	}
	if mo.Mode != "monthly" || mo.Price != "10162.39862" || mo.Per != "month" || mo.Term != 730*3600 || mo.Hourly != "13.921094" {
		t.Errorf("monthly %+v", mo)
	}

	// The table.
	code, stdout, stderr = runCLI(t, "catalog", "list", "--catalog", out, "--gpu", "h100", "--region", "US-EAST-1")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "PRICES (USD)") ||
		!strings.Contains(lines[1], "aws/us-east-1/p5.48xlarge") || !strings.Contains(lines[1], "80 GiB") ||
		!strings.Contains(lines[1], "on-demand 55.04/h, spot 28.106467/h") || !strings.Contains(lines[2], "aws/us-east-1/p5.4xlarge") {
		t.Errorf("table:\n%s", stdout)
	}

	// Each machine's accelerator and what it runs; a slice's share of a
	// GPU and of its memory.
	for _, tc := range []struct{ gpu, id, want string }{
		{"inferentia", "aws/us-east-1/inf1.xlarge", "aws/us-east-1/inf1.xlarge  AWS Inferentia  1     8 GiB    aws-inferentia  inference only"},
		{"h100", "aws/us-east-1/p5.4xlarge", "aws/us-east-1/p5.4xlarge   NVIDIA H100  1     80 GiB   nvidia       training, inference"},
		{"l4", "aws/us-east-1/g6f.large", "aws/us-east-1/g6f.large     NVIDIA L4  0.125  3 GiB    nvidia       inference only"},
	} {
		code, stdout, stderr = runCLI(t, "catalog", "list", "--catalog", out, "--gpu", tc.gpu, "--region", "us-east-1")
		if code != 0 {
			t.Fatalf("list: exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "ACCELERATOR") {
			t.Errorf("table has no ACCELERATOR column:\n%s", stdout)
		}
		found := false
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, tc.id+" ") {
				found = true
				if !strings.HasPrefix(strings.Join(strings.Fields(l), " "), strings.Join(strings.Fields(tc.want), " ")) {
					t.Errorf("row %q, want it to start %q", l, tc.want)
				}
			}
		}
		if !found {
			t.Errorf("no row for %s:\n%s", tc.id, stdout)
		}
	}
}

func TestCatalogImportToStdoutAndCSV(t *testing.T) {
	code, stdout, stderr := runCLI(t, "catalog", "import", "../../examples/catalog.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "imported 3 offers") || !strings.Contains(stderr, "1 vouchers") || !strings.Contains(stderr, "to stdout") {
		t.Errorf("summary %q", stderr)
	}
	c, err := pricing.ParseYAML("stdout", []byte(stdout))
	if err != nil || len(c.Offers) != 3 {
		t.Fatalf("stdout is not the catalog: %v\n%s", err, stdout)
	}

	dir := t.TempDir()
	csvOut := filepath.Join(dir, "c.csv")
	code, _, stderr = runCLI(t, "catalog", "import", "--from", "csv", "../../examples/catalog.csv", "-o", csvOut)
	if code != 0 {
		t.Fatalf("csv to csv: exit %d: %s", code, stderr)
	}
	back, err := pricing.Load(csvOut)
	if err != nil || len(back.Offers) != 4 {
		t.Fatalf("csv output: %v", err)
	}
	// A catalog with what CSV cannot say fails, and leaves no file.
	bad := filepath.Join(dir, "bad.csv")
	code, _, stderr = runCLI(t, "catalog", "import", "../../examples/catalog.yaml", "-o", bad)
	if code != 1 || !strings.Contains(stderr, "write YAML instead") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("failed import left %s", bad)
	}
}

func TestCatalogListDemo(t *testing.T) {
	code, stdout, stderr := runCLI(t, "catalog", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"aws/us-east-1/p4d.24xlarge", "idc-chengdu/cd1/v100x8", "weekly 500.00/wk", "on-demand 12.00/h (time-of-use)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo table lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCLI(t, "catalog", "list", "--region", "cd1", "--json")
	var offers []map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &offers) != nil || len(offers) != 2 {
		t.Fatalf("exit %d, %s", code, stdout)
	}
	if !strings.Contains(stdout, `"time_zone": "Asia/Shanghai"`) || !strings.Contains(stdout, `"multiplier_bp": 5000`) {
		t.Errorf("time-of-use missing from JSON:\n%s", stdout)
	}
	code, stdout, stderr = runCLI(t, "catalog", "list", "--gpu", "B300", "--json")
	if code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("no match as JSON: exit %d, %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "catalog", "list", "--gpu", "B300")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "no offers match") {
		t.Errorf("no match: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestCatalogErrors(t *testing.T) {
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("currency: USD\noffers:\n  - {provider: p, gpu_model: G, gpus: 1, plans: [{mode: on-demand, price: -2}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"import without file", []string{"import"}, 2, "accepts 1 arg"},
		{"import two files", []string{"import", "a.yaml", "b.yaml"}, 2, "accepts 1 arg"},
		{"unknown format", []string{"import", "--from", "xls", "a.xls"}, 2, `--from: invalid value "xls"`},
		{"no extension", []string{"import", "prices"}, 2, "give --from"},
		{"bad output", []string{"import", "--from", "aws-csv", awsPrices, "-o", "out.json"}, 2, `-o: invalid value "out.json"`},
		{"unknown flag", []string{"import", "--form", "csv", "a.csv"}, 2, "unknown flag: --form"},
		{"missing file", []string{"import", "--from", "csv", "/nonexistent/p.csv"}, 1, "/nonexistent/p.csv"},
		{"aws as canonical", []string{"import", awsPrices}, 1, "--from aws-csv"},
		{"bad yaml", []string{"import", badYAML}, 1, badYAML + `:3: offers[0].plans[0].price: invalid value "-2": want a price >= 0`},
		{"list bad catalog", []string{"list", "--catalog", badYAML}, 1, "catalog list: " + badYAML + ":3:"},
		{"list missing catalog", []string{"list", "--catalog", "/nonexistent/c.yaml"}, 1, "/nonexistent/c.yaml"},
		{"list argument", []string{"list", "extra"}, 2, `unexpected argument "extra"`},
		{"unknown subcommand", []string{"lst"}, 2, `unexpected argument "lst"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"catalog"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d and %q", code, stderr, stdout, tt.code, tt.want)
			}
		})
	}
}
