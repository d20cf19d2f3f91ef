package pricing

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// The fuzzers check that the readers never panic, that every error they
// return is a *ParseError, and that whatever they accept validates and
// round-trips through the writers. Seeds: the examples, the demo, the
// AWS excerpt, and the files under testdata/fuzz/<FuzzName>/ (crashers
// found earlier are kept there).

func addFiles(f *testing.F, paths ...string) {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// checkAccepted is what every accepted catalog must satisfy.
func checkAccepted(t *testing.T, c *Catalog) {
	if err := c.Validate(); err != nil {
		t.Fatalf("accepted catalog does not validate: %v", err)
	}
	roundTripYAML(t, c)
	var buf bytes.Buffer
	if WriteCSV(&buf, c) == nil {
		roundTripCSV(t, c)
	}
}

func checkError(t *testing.T, err error) {
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %T %v, want a *ParseError", err, err)
	}
	if pe.File == "" {
		t.Fatalf("error %v names no file", err)
	}
}

func FuzzParseYAML(f *testing.F) {
	addFiles(f, "../../examples/catalog.yaml", "../../examples/idc-v100-cny.yaml", "demo.yaml")
	f.Add([]byte("currency: USD\noffers: [{provider: p, gpu_model: G, gpus: 1, plans: [{mode: spot, series: [{at: 2026-01-01, price: 1}]}]}]\n"))
	f.Add([]byte("currency: USD\noffers:\n  - &a {provider: p, gpu_model: G, gpus: 1, plans: [{mode: daily, price: 1}]}\n  - *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseYAML("fuzz.yaml", data)
		if err != nil {
			checkError(t, err)
			return
		}
		checkAccepted(t, c)
	})
}

func FuzzReadCSV(f *testing.F) {
	addFiles(f, "../../examples/catalog.csv")
	f.Add([]byte("provider,region,instance_type,gpu_model,gpu_count,currency,spot_hourly,spot_reclaim_rate\np,r,i,G,1,usd,0.5,1%\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadCSV("fuzz.csv", bytes.NewReader(data))
		if err != nil {
			checkError(t, err)
			return
		}
		checkAccepted(t, c)
		roundTripCSV(t, c)
	})
}

func FuzzImportAWS(f *testing.F) {
	addFiles(f, "testdata/aws_excerpt.csv")
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ImportAWS("fuzz.csv", bytes.NewReader(data))
		if err != nil {
			checkError(t, err)
			return
		}
		checkAccepted(t, c)
		roundTripCSV(t, c)
	})
}
