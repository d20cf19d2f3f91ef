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
	f.Add([]byte("currency: USD\noffers: [{provider: p, gpu_model: NVIDIA L4, gpus: 0.125, gpu_memory_gib: 24, capability: training, plans: [{mode: on-demand, price: 0.1}]}]\n"))
	f.Add([]byte("currency: USD\noffers: [{provider: p, gpu_model: AWS Inferentia, gpus: 4, accelerator: nvidia, plans: [{mode: on-demand, price: 1}]}]\n"))
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
	f.Add([]byte("provider,region,instance_type,gpu_model,gpu_count,gpu_memory_gib,currency,hourly,accelerator,capability\n" +
		"p,r,q,NVIDIA L4,0.25,24,USD,0.2,,\np,r,e,NVIDIA L4,0.125,22.5,USD,0.1,,training\np,r,i,AWS Inferentia,1,8,USD,1,aws-inferentia,inference\n"))
	f.Add([]byte("provider,region,instance_type,gpu_model,gpu_count,currency,hourly\np,r,i,G,0.001,USD,1\np,r,j,G,0.999,USD,1\n"))
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
	const header = "instance_type,gpu_model,gpu_count,gpu_memory_gib_total,vcpus,memory_gib,region,ondemand_usd_per_hr\n"
	f.Add([]byte(header + "g6f.large,NVIDIA L4,0.125,3,2,8,us-east-1,0.2\ninf1.xlarge,AWS Inferentia,1,8,4,8,us-east-1,0.228\ntrn1.2xlarge,AWS Inferentia,1,32,8,32,us-east-1,1.34\n"))
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
