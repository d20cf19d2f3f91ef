package plan

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDemandCSV(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	classes := []string{"NVIDIA Tesla V100", "NVIDIA A100"}
	tests := []struct {
		name, csv string
		want      Series
	}{
		{
			name: "hours, shares, gaps, comments",
			csv: "# demand\nhour,gpu_model,gpus,interruptible,deferrable\n" +
				"0,V100,4,0.5,25%\n\n2,nvidia a100,3,,\n1,V100,3,0.5,0\n",
			want: Series{Start: start, Hours: 3, Classes: []ClassDemand{
				{GPUModel: "NVIDIA Tesla V100", GPUs: []int64{4, 3, 0}, Interruptible: []int64{2, 1, 0}, Deferrable: []int64{1, 0, 0}},
				{GPUModel: "NVIDIA A100", GPUs: []int64{0, 0, 3}},
			}},
		},
		{
			name: "timestamps start at the earliest, any offset",
			csv:  "gpus,timestamp,gpu_model\n2,2026-03-02T10:00:00+08:00,A100\n5,2026-03-02T01:00:00Z,A100\n",
			want: Series{Start: time.Date(2026, 3, 2, 1, 0, 0, 0, time.UTC), Hours: 2, Classes: []ClassDemand{
				{GPUModel: "NVIDIA A100", GPUs: []int64{5, 2}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDemandCSV("d.csv", strings.NewReader(tt.csv), DemandCSVOptions{Start: start, Classes: classes})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("series (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDemandCSVErrors(t *testing.T) {
	tests := []struct{ name, csv, want string }{
		{"empty file", "", "d.csv: empty file"},
		{"header only", "hour,gpu_model,gpus\n", "d.csv: no demand rows after the header: the series is empty"},
		{"unknown column", "hour,gpu_model,gpus,team\n", `d.csv:1: header: invalid value "team": want columns among hour, timestamp, gpu_model, gpus, interruptible, deferrable`},
		{"no time column", "gpu_model,gpus\nV100,1\n", "want exactly one of the columns hour and timestamp"},
		{"both time columns", "hour,timestamp,gpu_model,gpus\n", "want exactly one of the columns hour and timestamp"},
		{"no gpus column", "hour,gpu_model\n", "want a gpus column"},
		{"negative", "hour,gpu_model,gpus\n0,V100,-1\n", `d.csv:2: gpus: invalid value "-1": want a whole number of GPUs 0..1000000`},
		{"fraction", "hour,gpu_model,gpus\n0,V100,1.5\n", `d.csv:2: gpus: invalid value "1.5"`},
		{"bad hour", "hour,gpu_model,gpus\nx,V100,1\n", `d.csv:2: hour: invalid value "x": want a whole hour 0..87599`},
		{"off the hour", "timestamp,gpu_model,gpus\n2026-01-01T00:30:00Z,V100,1\n", `d.csv:2: timestamp: invalid value "2026-01-01T00:30:00Z": want an RFC 3339 time on a whole hour`},
		{"bad share", "hour,gpu_model,gpus,interruptible\n0,V100,1,1.5\n", `d.csv:2: interruptible: invalid value "1.5": want a share 0..1`},
		{"shares over 1", "hour,gpu_model,gpus,interruptible,deferrable\n0,V100,1,60%,0.5\n", `d.csv:2: interruptible+deferrable: invalid value "60%+0.5"`},
		{"unknown class", "hour,gpu_model,gpus\n0,V100,1\n1,T4,1\n", `d.csv:3: gpu_model: plan: unknown GPU class "T4": the catalog rents "NVIDIA Tesla V100", "NVIDIA A100"`},
		{"ambiguous class", "hour,gpu_model,gpus\n0,NVIDIA,1\n", `d.csv:2: gpu_model: plan: unknown GPU class "NVIDIA": ambiguous, matches "NVIDIA Tesla V100", "NVIDIA A100"`},
		{"short line", "hour,gpu_model,gpus\n0,V100,1\n1,V100\n", "d.csv:3: column 1: wrong number of fields"},
		{"bad quote", "hour,gpu_model,gpus\n0,\"V100,1\n", `d.csv:2: column`},
		{"duplicate", "hour,gpu_model,gpus\n0,V100,1\n0,NVIDIA Tesla V100,2\n", "d.csv:3: hour: NVIDIA Tesla V100 has a second row for hour 0 (the first is on line 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDemandCSV("d.csv", strings.NewReader(tt.csv), DemandCSVOptions{Classes: []string{"NVIDIA Tesla V100", "NVIDIA A100"}})
			var de *DemandError
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *DemandError containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParseDemandCSV: the parser never panics, and what it accepts is a
// valid series.
func FuzzParseDemandCSV(f *testing.F) {
	f.Add("hour,gpu_model,gpus,interruptible,deferrable\n0,V100,4,0.5,25%\n3,A100,2,,\n")
	f.Add("timestamp,gpu_model,gpus\n2026-01-01T00:00:00Z,V100,1\n2026-01-01T05:00:00+01:00,V100,1\n")
	f.Add("hour,gpu_model,gpus\n0,V100,-1\n")
	f.Fuzz(func(t *testing.T, data string) {
		s, err := ParseDemandCSV("f.csv", strings.NewReader(data), DemandCSVOptions{})
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted an invalid series: %v", err)
		}
	})
}

func TestFindClass(t *testing.T) {
	classes := []string{"NVIDIA A100", "NVIDIA A10G", "NVIDIA Tesla V100"}
	for in, want := range map[string]string{"nvidia a100": "NVIDIA A100", "A10G": "NVIDIA A10G", "v100": "NVIDIA Tesla V100", "A100": "NVIDIA A100"} {
		if got, err := FindClass(classes, in); err != nil || got != want {
			t.Errorf("FindClass(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := FindClass(classes, "A10"); err == nil || !errors.Is(err, ErrUnknownClass) || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("A10: %v, want ambiguous", err)
	}
}
