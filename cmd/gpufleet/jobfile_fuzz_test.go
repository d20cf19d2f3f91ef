package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// FuzzParseJobFile: any bytes as a job file give a request or an error —
// never a panic — and a field error names a key the file format has.
func FuzzParseJobFile(f *testing.F) {
	for _, seed := range []string{
		"id: train\nteam: ml\ngpus: 2\nest_duration: 3h\ncommand: [python, train.py]\n",
		"team: ml\ntier: core\ngpus: 1\ngpu_milli: 500\ngpu_mem_mib: 8192\ndeadline: 2026-03-02T18:00:00Z\ncheckpoint_interval: 10m\n",
		"team: ml\ngpus: two\n",
		"team: ml\nest_duration: -5m\n",
		"team: ml\nunknown: 1\n",
		"models: [A100, H100]\nthroughput: {A100: 100, H100: 250}\nidempotency_key: k1\n",
		"",
		"- a\n- b\n",
		"team: &a ml\nuser: *a\n",
		"gpus: 1\ngpu_milli: 125\nworkload: inference\naccelerators: [aws-inferentia, nvidia]\n",
		"gpus: 1\nworkload: serving\naccelerators: [cuda]\n",
	} {
		f.Add([]byte(seed))
	}
	keys := map[string]bool{}
	for _, k := range strings.Fields("id team user tier gpus gpu_milli gpu_mem_mib models throughput cpu_milli mem_mib shards est_duration deadline interruptible deferrable checkpoint_interval command image idempotency_key workload accelerators") {
		keys[k] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, _, err := parseJobFile("job.yaml", data)
		if err != nil {
			var fe *core.FieldError
			if errors.As(err, &fe) {
				if key, _, _ := strings.Cut(fe.Field, "["); !keys[key] {
					t.Fatalf("field error names %q, not a job-file key: %v", fe.Field, err)
				}
			}
			if !strings.HasPrefix(err.Error(), "job.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if req.EstDurationSeconds < 0 || req.CheckpointSeconds < 0 {
			t.Fatalf("negative duration accepted: %+v", req)
		}
	})
}
