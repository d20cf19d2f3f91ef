package pricing

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// awsCSV is the real AWS price list; tests run in the package directory
// and /work/shared sits beside the repository.
const awsCSV = "../../../shared/data/aws-gpu-pricing-vantage/aws_gpu_prices_linux.csv"

// catalogOpts compares catalogs: zones by name, times by instant, nil and
// empty slices alike.
var catalogOpts = cmp.Options{
	cmp.Comparer(func(a, b *time.Location) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.String() == b.String()
	}),
	cmpopts.EquateEmpty(),
}

func diffCatalogs(a, b *Catalog) string { return cmp.Diff(a, b, catalogOpts) }

// roundTripYAML writes c and reads it back, failing t on any difference.
func roundTripYAML(t testing.TB, c *Catalog) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteYAML(&buf, c); err != nil {
		t.Fatalf("WriteYAML: %v", err)
	}
	back, err := ParseYAML("written.yaml", buf.Bytes())
	if err != nil {
		t.Fatalf("ParseYAML(WriteYAML(c)): %v\n%s", err, buf.Bytes())
	}
	if d := diffCatalogs(c, back); d != "" {
		t.Fatalf("YAML round trip differs (-want +got):\n%s\n%s", d, buf.Bytes())
	}
	return buf.Bytes()
}

// roundTripCSV writes c as CSV and reads it back.
func roundTripCSV(t testing.TB, c *Catalog) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, c); err != nil {
		t.Fatalf("WriteCSV: %v", err)
	}
	out := append([]byte(nil), buf.Bytes()...)
	back, err := ReadCSV("written.csv", &buf)
	if err != nil {
		t.Fatalf("ReadCSV(WriteCSV(c)): %v\n%s", err, out)
	}
	if d := diffCatalogs(c, back); d != "" {
		t.Fatalf("CSV round trip differs (-want +got):\n%s\n%s", d, out)
	}
	return out
}

func loadAWS(t testing.TB, path string) *Catalog {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ImportAWS(path, f)
	if err != nil {
		t.Fatalf("ImportAWS: %v", err)
	}
	return c
}

// wantErr checks that err is a *ParseError whose message contains every
// part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func mustParse(t *testing.T, src string) *Catalog {
	t.Helper()
	c, err := ParseYAML("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("ParseYAML: %v", err)
	}
	return c
}
