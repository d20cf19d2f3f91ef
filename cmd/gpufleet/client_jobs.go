package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/api"
	"github.com/gpufleet/gpufleet/internal/client"
	"github.com/gpufleet/gpufleet/internal/core"
)

// jobFile is a job as "submit -f" reads it: the API's JobRequest, with
// durations as Go durations ("90m") and the deadline as RFC 3339.
type jobFile struct {
	ID                 string           `yaml:"id"`
	Team               string           `yaml:"team"`
	User               string           `yaml:"user"`
	Tier               string           `yaml:"tier"`
	GPUs               int              `yaml:"gpus"`
	GPUMilli           int64            `yaml:"gpu_milli"`
	GPUMemMiB          int64            `yaml:"gpu_mem_mib"`
	Models             []string         `yaml:"models"`
	Throughput         map[string]int64 `yaml:"throughput"`
	CPUMilli           int64            `yaml:"cpu_milli"`
	MemMiB             int64            `yaml:"mem_mib"`
	Shards             int              `yaml:"shards"`
	EstDuration        string           `yaml:"est_duration"`
	Deadline           string           `yaml:"deadline"`
	Interruptible      bool             `yaml:"interruptible"`
	Deferrable         bool             `yaml:"deferrable"`
	CheckpointInterval string           `yaml:"checkpoint_interval"`
	Command            []string         `yaml:"command"`
	Image              string           `yaml:"image"`
	IdempotencyKey     string           `yaml:"idempotency_key"`
	Workload           string           `yaml:"workload"`
	Accelerators       []string         `yaml:"accelerators"`
}

// readJobFile reads a job file strictly: an unknown key, a wrong type or
// a bad duration is an error naming the field.
func readJobFile(path string) (api.JobRequest, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return api.JobRequest{}, "", err
	}
	return parseJobFile(path, data)
}

// parseJobFile is readJobFile on the contents data of the file path.
func parseJobFile(path string, data []byte) (api.JobRequest, string, error) {
	var f jobFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return api.JobRequest{}, "", fmt.Errorf("%s: %w", path, yamlMessage(err, data))
	}
	req := api.JobRequest{ID: f.ID, Team: f.Team, User: f.User, Tier: f.Tier, GPUs: f.GPUs, GPUMilli: f.GPUMilli, GPUMemMiB: f.GPUMemMiB,
		Models: f.Models, Throughput: f.Throughput, CPUMilli: f.CPUMilli, MemMiB: f.MemMiB, Shards: f.Shards, Interruptible: f.Interruptible,
		Deferrable: f.Deferrable, Command: f.Command, Image: f.Image}
	if err := setAccel(&req, "workload", f.Workload, "accelerators", f.Accelerators); err != nil {
		return api.JobRequest{}, "", fmt.Errorf("%s: %w", path, err)
	}
	for _, d := range []struct {
		name, v string
		dst     *int64
	}{{"est_duration", f.EstDuration, &req.EstDurationSeconds}, {"checkpoint_interval", f.CheckpointInterval, &req.CheckpointSeconds}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v < 0 {
			return api.JobRequest{}, "", fmt.Errorf("%s: %w", path, &core.FieldError{Field: d.name, Value: d.v, Allowed: "a duration such as 90m or 2h30m"})
		}
		*d.dst = int64(v / time.Second)
	}
	if f.Deadline != "" {
		t, err := time.Parse(time.RFC3339, f.Deadline)
		if err != nil {
			return api.JobRequest{}, "", fmt.Errorf("%s: %w", path, &core.FieldError{Field: "deadline", Value: f.Deadline, Allowed: "an RFC 3339 time such as 2026-03-02T18:00:00Z"})
		}
		req.Deadline = t
	}
	return req, f.IdempotencyKey, nil
}

func newSubmitCmd() *cobra.Command {
	var cf clientFlags
	var file, key, models, duration, deadline, checkpoint, workload, accels string
	var req api.JobRequest
	cmd := &cobra.Command{
		Use:   "submit [flags] [-- COMMAND ARGS...]",
		Short: "Submit a job to the server, from flags or a YAML job file",
		Long: `Submit a job. Fields come from a YAML job file (-f; docs/server.md lists its keys)
and from flags, a flag overriding the file. An idempotency key (--idempotency-key,
or idempotency_key: in the file) makes a retried submission safe: the server
answers the same job instead of creating a second one.`,
		Example: `  gpufleet submit --team ml --gpus 2 --duration 3h -- python train.py
  gpufleet submit -f job.yaml --idempotency-key train-2026-03-02`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if file != "" {
				fromFile, fileKey, err := readJobFile(file)
				if err != nil {
					return usageError{err}
				}
				if key == "" {
					key = fileKey
				}
				override(cmd, &fromFile, &req)
				req = fromFile
			}
			if duration != "" {
				d, err := time.ParseDuration(duration)
				if err != nil || d < 0 {
					return usageError{&core.FieldError{Field: "--duration", Value: duration, Allowed: "a duration such as 90m or 2h30m"}}
				}
				req.EstDurationSeconds = int64(d / time.Second)
			}
			if checkpoint != "" {
				d, err := time.ParseDuration(checkpoint)
				if err != nil || d < 0 {
					return usageError{&core.FieldError{Field: "--checkpoint-interval", Value: checkpoint, Allowed: "a duration such as 10m"}}
				}
				req.CheckpointSeconds = int64(d / time.Second)
			}
			if deadline != "" {
				t, err := time.Parse(time.RFC3339, deadline)
				if err != nil {
					return usageError{&core.FieldError{Field: "--deadline", Value: deadline, Allowed: "an RFC 3339 time such as 2026-03-02T18:00:00Z"}}
				}
				req.Deadline = t
			}
			if models != "" {
				req.Models = strings.Split(models, ",")
			}
			// --workload and --accelerators override the job file's.
			if ch := cmd.Flags().Changed; ch("workload") || ch("accelerators") {
				w := string(req.Workload)
				if ch("workload") {
					w = workload
				}
				var as []string
				if ch("accelerators") {
					if accels != "" {
						as = strings.Split(accels, ",")
					}
				} else {
					for _, a := range req.Accelerators {
						as = append(as, string(a))
					}
				}
				if err := setAccel(&req, "--workload", w, "--accelerators", as); err != nil {
					return usageError{err}
				}
			}
			if len(args) > 0 {
				req.Command = args
			}
			job, created, err := c.SubmitJob(cmd.Context(), req, key)
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(cmd, job)
			}
			verb := "submitted"
			if !created {
				verb = "already submitted (same idempotency key)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s %s: team %s, %s, %d GPU(s), %s on %s, %s\n", job.ID, verb, job.Team, job.Tier, job.GPUs,
				job.Workload, core.FormatAccelerators(job.Accelerators), job.State)
			return nil
		},
	}
	cf.add(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&file, "file", "f", "", "YAML job file")
	fl.StringVar(&key, "idempotency-key", "", "make retries of this submission safe")
	fl.StringVar(&req.ID, "id", "", "job id, admin tokens only (the server names a team token's jobs: job- and 16 hex digits)")
	fl.StringVar(&req.Team, "team", "", "team (default: the token's)")
	fl.StringVar(&req.Tier, "tier", "", "core, regular (default) or offline")
	fl.IntVar(&req.GPUs, "gpus", 0, "GPUs per shard")
	fl.Int64Var(&req.GPUMilli, "gpu-milli", 0, "share of each GPU in milli-GPUs (default 1000: whole GPUs)")
	fl.Int64Var(&req.GPUMemMiB, "gpu-mem-mib", 0, "GPU memory per GPU, MiB")
	fl.StringVar(&models, "models", "", "allowed GPU models, comma-separated")
	fl.IntVar(&req.Shards, "shards", 0, "independent shards")
	fl.StringVar(&duration, "duration", "", "estimated duration (90m, 3h)")
	fl.StringVar(&deadline, "deadline", "", "deadline, RFC 3339")
	fl.BoolVar(&req.Interruptible, "interruptible", false, "may be preempted (checkpoints)")
	fl.BoolVar(&req.Deferrable, "deferrable", false, "may wait for a cheaper time-of-use window")
	fl.StringVar(&checkpoint, "checkpoint-interval", "", "how often the job checkpoints (10m)")
	fl.StringVar(&req.Image, "image", "", "container image")
	fl.StringVar(&workload, "workload", "", "training (default) or inference: only inference runs on inference-only machines (Inferentia, GPU slices)")
	fl.StringVar(&accels, "accelerators", "", "accelerator families the job is built for, comma-separated (default nvidia): "+strings.Join(accelNames(), ", "))
	return cmd
}

// setAccel validates a job's workload and accelerator list and sets them
// on req; wField and aField name them in errors as the input does.
func setAccel(req *api.JobRequest, wField, workload, aField string, accels []string) error {
	req.Workload, req.Accelerators = "", nil
	if workload != "" {
		w, err := core.ParseWorkload(wField, workload)
		if err != nil {
			return err
		}
		req.Workload = w
	}
	for i, s := range accels {
		field := fmt.Sprintf("%s[%d]", aField, i)
		if strings.HasPrefix(aField, "--") {
			field = aField
		}
		a, err := core.ParseAccelerator(field, strings.TrimSpace(s))
		if err != nil {
			return err
		}
		req.Accelerators = append(req.Accelerators, a)
	}
	return nil
}

func accelNames() []string {
	out := make([]string, len(core.Accelerators))
	for i, a := range core.Accelerators {
		out[i] = string(a)
	}
	return out
}

// override copies into dst the fields of flags the user set.
func override(cmd *cobra.Command, dst, flags *api.JobRequest) {
	ch := cmd.Flags().Changed
	if ch("id") {
		dst.ID = flags.ID
	}
	if ch("team") {
		dst.Team = flags.Team
	}
	if ch("tier") {
		dst.Tier = flags.Tier
	}
	if ch("gpus") {
		dst.GPUs = flags.GPUs
	}
	if ch("gpu-milli") {
		dst.GPUMilli = flags.GPUMilli
	}
	if ch("gpu-mem-mib") {
		dst.GPUMemMiB = flags.GPUMemMiB
	}
	if ch("shards") {
		dst.Shards = flags.Shards
	}
	if ch("interruptible") {
		dst.Interruptible = flags.Interruptible
	}
	if ch("deferrable") {
		dst.Deferrable = flags.Deferrable
	}
	if ch("image") {
		dst.Image = flags.Image
	}
}

func jobRows(js []api.JobView) [][]string {
	rows := make([][]string, 0, len(js))
	for _, j := range js {
		rows = append(rows, []string{j.ID, j.Team, j.Tier, j.State, strconv.Itoa(j.GPUs) + "x" + milliText(j.GPUMilli), j.Submit.Format(time.RFC3339)})
	}
	return rows
}

var jobHeader = []string{"ID", "TEAM", "TIER", "STATE", "GPUS", "SUBMITTED"}

// milliText renders a per-GPU share: "1" for a whole GPU, "0.25" else.
func milliText(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%03d", m/1000, m%1000), "0")
}

func newJobsCmd() *cobra.Command {
	var cf clientFlags
	var f client.JobFilter
	var states string
	var all bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs on the server, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if states != "" {
				f.States = strings.Split(states, ",")
			}
			var jobs []api.JobView
			next := ""
			for {
				p, err := c.ListJobs(cmd.Context(), f)
				if err != nil {
					return err
				}
				jobs, next = append(jobs, p.Jobs...), p.Next
				if !all || next == "" {
					break
				}
				f.Cursor = next
			}
			return printPage(cmd, cf, api.JobsPage{Jobs: jobs, Next: next}, jobHeader, jobRows(jobs), next, " (or --all)")
		},
	}
	cf.add(cmd)
	cmd.Flags().StringVar(&f.Team, "team", "", "only this team's jobs")
	cmd.Flags().StringVar(&states, "state", "", "only these states, comma-separated (pending,running,...)")
	cmd.Flags().StringVar(&f.Tier, "tier", "", "only this tier")
	addPageFlags(cmd, &f.Limit, &f.Cursor)
	cmd.Flags().BoolVar(&all, "all", false, "follow the cursor to the last page")
	attachJobsKube(cmd, &cf, &f, &states) // jobs_kube.go
	return cmd
}

func newJobCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "job ID",
		Short: "Show one job",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			j, err := c.GetJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(cmd, j)
			}
			return showJob(cmd.OutOrStdout(), j)
		},
	}
	cf.add(cmd)
	return cmd
}

func showJob(w io.Writer, j api.JobView) error {
	rows := [][]string{{"id", j.ID}, {"team", j.Team}, {"user", j.User}, {"tier", j.Tier}, {"state", j.State + " since " + j.StateAt.Format(time.RFC3339)},
		{"submitted", j.Submit.Format(time.RFC3339)}, {"gpus", fmt.Sprintf("%d x %s GPU", j.GPUs, milliText(j.GPUMilli))}, {"shards", strconv.Itoa(j.Shards)},
		{"estimated", (time.Duration(j.EstDurationSeconds) * time.Second).String()},
		{"workload", string(j.Workload.Or()) + " on " + core.FormatAccelerators(j.Accelerators)}}
	if len(j.Models) > 0 {
		rows = append(rows, []string{"models", strings.Join(j.Models, ",")})
	}
	if !j.Deadline.IsZero() && j.Deadline.Year() > 1 {
		rows = append(rows, []string{"deadline", j.Deadline.Format(time.RFC3339)})
	}
	if len(j.Command) > 0 {
		rows = append(rows, []string{"command", strings.Join(j.Command, " ")})
	}
	if j.Image != "" {
		rows = append(rows, []string{"image", j.Image})
	}
	return table(w, []string{"FIELD", "VALUE"}, rows)
}

func newCancelCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job; the control loop stops its units",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			j, err := c.CancelJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(cmd, j)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s: %s\n", j.ID, j.State)
			return nil
		},
	}
	cf.add(cmd)
	return cmd
}

func newLogsCmd() *cobra.Command {
	var cf clientFlags
	var q client.LogQuery
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's output (from --offset, or its last --tail lines)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if q.Offset > 0 && q.Lines > 0 {
				return usageError{errors.New("--offset and --tail: give one")}
			}
			if q.Lines < 0 || q.Lines > api.MaxTailLines {
				return usageError{&core.FieldError{Field: "tail", Value: strconv.FormatInt(q.Lines, 10), Allowed: fmt.Sprintf("0..%d lines", api.MaxTailLines)}}
			}
			v, err := c.JobLogs(cmd.Context(), args[0], q)
			if err != nil {
				return err
			}
			if cf.json {
				return writeJSON(cmd, v)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), v.Text)
			if next := v.Start + int64(len(v.Text)); next < v.End {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: --offset %d (log has %d bytes)\n", next, v.End)
			}
			return err
		},
	}
	cf.add(cmd)
	cmd.Flags().Int64Var(&q.Offset, "offset", 0, "first byte to print")
	cmd.Flags().Int64Var(&q.Limit, "limit", 0, "most bytes to print (default: the server's)")
	cmd.Flags().Int64Var(&q.Lines, "tail", 0, "print the last N lines")
	return cmd
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
