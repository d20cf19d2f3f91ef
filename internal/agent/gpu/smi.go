package gpu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// QueryGPUFields are the --query-gpu fields SMI asks for, in order.
const QueryGPUFields = "index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu"

// QueryAppsFields are the --query-compute-apps fields SMI asks for.
const QueryAppsFields = "gpu_uuid,pid,used_memory"

// Command runs a program and returns what it wrote to standard output. It
// is how SMI reaches nvidia-smi, so tests can replay recorded outputs.
type Command func(ctx context.Context, name string, args ...string) ([]byte, error)

// ExecCommand runs the program with os/exec; a failure carries the
// program's standard error.
func ExecCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// SMI reads GPUs by running nvidia-smi. It makes two calls per sample
// (GPUs, then compute processes) and a third, nvidia-smi -L, only when a
// GPU's utilization is not reported — which is what MIG mode does — to
// list that GPU's MIG devices as entries of their own.
type SMI struct {
	// Path is the nvidia-smi binary; empty means "nvidia-smi" on PATH.
	Path string
	// Run runs it; nil means ExecCommand.
	Run Command
}

var _ Source = (*SMI)(nil)

// Name returns "nvidia-smi".
func (*SMI) Name() string { return "nvidia-smi" }

// Close does nothing: SMI holds nothing between samples.
func (*SMI) Close() error { return nil }

func (s *SMI) run(ctx context.Context, args ...string) ([]byte, error) {
	path, run := s.Path, s.Run
	if path == "" {
		path = "nvidia-smi"
	}
	if run == nil {
		run = ExecCommand
	}
	return run(ctx, path, args...)
}

// Sample runs nvidia-smi and parses what it prints.
func (s *SMI) Sample(ctx context.Context) ([]Reading, error) {
	out, err := s.run(ctx, "--query-gpu="+QueryGPUFields, "--format=csv,noheader,nounits")
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: query gpus: %w", err)
	}
	gpus, err := ParseQueryGPU(out)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	out, err = s.run(ctx, "--query-compute-apps="+QueryAppsFields, "--format=csv,noheader,nounits")
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: query compute apps: %w", err)
	}
	apps, err := ParseComputeApps(out)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	byUUID := make(map[string]int, len(gpus))
	for i := range gpus {
		gpus[i].ProcessesKnown = true
		byUUID[gpus[i].UUID] = i
	}
	for _, a := range apps {
		// A process of a GPU that vanished between the two calls is
		// dropped: it has no reading to belong to.
		if i, ok := byUUID[a.GPUUUID]; ok {
			gpus[i].Processes = append(gpus[i].Processes, Process{PID: a.PID, UsedMemMiB: a.UsedMemMiB, SMUtilPct: Unknown})
		}
	}
	needMIG := false
	for _, g := range gpus {
		if g.UtilPct == Unknown {
			needMIG = true
		}
	}
	if !needMIG {
		return gpus, nil
	}
	out, err = s.run(ctx, "-L")
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: list gpus: %w", err)
	}
	migs, err := ParseList(out)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return mergeMIG(gpus, migs), nil
}

// mergeMIG places each MIG device right after its parent GPU.
func mergeMIG(gpus, migs []Reading) []Reading {
	if len(migs) == 0 {
		return gpus
	}
	out := make([]Reading, 0, len(gpus)+len(migs))
	for _, g := range gpus {
		out = append(out, g)
		for _, m := range migs {
			if m.ParentUUID == g.UUID {
				m.Index = g.Index
				out = append(out, m)
			}
		}
	}
	return out
}

// notReported reports whether an nvidia-smi field is one of its markers
// for a value it cannot give: [N/A], [Not Supported], [Unknown Error],
// [Insufficient Permissions], [GPU requires reset]… all bracketed, and a
// bare N/A in some versions.
func notReported(v string) bool {
	return v == "N/A" || (len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']')
}

// csvField is one field of one line of nvidia-smi's CSV.
type csvField struct {
	src    string // the query, for errors
	line   int
	column int
	name   string
	value  string
}

func (f csvField) errorf(allowed string) error {
	return &core.ParseError{File: f.src, Line: f.line, Column: f.column, Field: f.name, Value: f.value, Allowed: allowed}
}

func (f csvField) integer(min, max int64) (int64, error) {
	if notReported(f.value) {
		return Unknown, nil
	}
	n, err := strconv.ParseInt(f.value, 10, 64)
	if err != nil || n < min || n > max {
		return 0, f.errorf(fmt.Sprintf("an integer %d..%d or [N/A]", min, max))
	}
	return n, nil
}

// watts parses a power draw such as 72.39 and rounds it to whole watts.
func (f csvField) watts() (int, error) {
	if notReported(f.value) {
		return Unknown, nil
	}
	w, err := strconv.ParseFloat(f.value, 64)
	if err != nil || math.IsNaN(w) || w < 0 || w > 100000 {
		return 0, f.errorf("watts 0..100000 or [N/A]")
	}
	return int(math.Round(w)), nil
}

// splitCSV splits out into lines of fields, trimming the spaces nvidia-smi
// puts after each comma. Blank lines are skipped.
func splitCSV(out []byte, src string, names []string, fn func(fields []csvField) error) error {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if text == "" {
			continue
		}
		parts := strings.Split(text, ",")
		if len(parts) != len(names) {
			return &core.ParseError{File: src, Line: line, Value: text, Problem: fmt.Sprintf("%d fields", len(parts)), Allowed: fmt.Sprintf("%d fields: %s", len(names), strings.Join(names, ","))}
		}
		fields := make([]csvField, len(parts))
		for i, p := range parts {
			fields[i] = csvField{src: src, line: line, column: i + 1, name: names[i], value: strings.TrimSpace(p)}
		}
		if err := fn(fields); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return &core.ParseError{File: src, Line: line + 1, Problem: "unreadable line", Err: err}
	}
	return nil
}

// ParseQueryGPU parses the output of
//
//	nvidia-smi --query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu --format=csv,noheader,nounits
//
// one physical GPU per line. Values nvidia-smi cannot give ([N/A],
// [Not Supported]) become Unknown. An error is a *core.ParseError naming
// the line, the column and its field, and the value.
func ParseQueryGPU(out []byte) ([]Reading, error) {
	var gpus []Reading
	names := strings.Split(QueryGPUFields, ",")
	err := splitCSV(out, "nvidia-smi --query-gpu", names, func(f []csvField) error {
		r := unknownReading()
		idx, err := f[0].integer(0, 1<<20)
		if err != nil {
			return err
		}
		if idx == Unknown {
			return f[0].errorf("a GPU index >= 0")
		}
		r.Index = int(idx)
		if f[1].value == "" || notReported(f[1].value) || strings.ContainsAny(f[1].value, " \t") {
			return f[1].errorf("a GPU UUID such as GPU-5d5ba0d6-…")
		}
		r.UUID = f[1].value
		if !notReported(f[2].value) {
			r.Name = f[2].value
		}
		util, err := f[3].integer(0, 100)
		if err != nil {
			return err
		}
		r.UtilPct = int(util)
		if r.MemUsedMiB, err = f[4].integer(0, 1<<40); err != nil {
			return err
		}
		if r.MemTotalMiB, err = f[5].integer(0, 1<<40); err != nil {
			return err
		}
		if r.PowerW, err = f[6].watts(); err != nil {
			return err
		}
		temp, err := f[7].integer(-273, 1000)
		if err != nil {
			return err
		}
		r.TempC = int(temp)
		gpus = append(gpus, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gpus, nil
}

// App is one line of nvidia-smi --query-compute-apps.
type App struct {
	GPUUUID    string
	PID        int
	UsedMemMiB int64
}

// ParseComputeApps parses the output of
//
//	nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits
//
// An empty output, or the line "No running processes found", is no
// process at all.
func ParseComputeApps(out []byte) ([]App, error) {
	if string(bytes.TrimSpace(out)) == "No running processes found" {
		return nil, nil
	}
	var apps []App
	names := strings.Split(QueryAppsFields, ",")
	err := splitCSV(out, "nvidia-smi --query-compute-apps", names, func(f []csvField) error {
		if f[0].value == "" || notReported(f[0].value) {
			return f[0].errorf("a GPU UUID")
		}
		pid, err := f[1].integer(1, math.MaxInt32)
		if err != nil {
			return err
		}
		if pid == Unknown {
			return f[1].errorf("a process id >= 1")
		}
		mem, err := f[2].integer(0, 1<<40)
		if err != nil {
			return err
		}
		apps = append(apps, App{GPUUUID: f[0].value, PID: int(pid), UsedMemMiB: mem})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return apps, nil
}

// ParseList parses nvidia-smi -L and returns its MIG devices, each a
// Reading with its parent's index and UUID, its profile as Name, and every
// value Unknown (nvidia-smi's queries do not report them per MIG device).
// Lines look like
//
//	GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
//	  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
func ParseList(out []byte) ([]Reading, error) {
	const src = "nvidia-smi -L"
	var (
		migs   []Reading
		parent *Reading
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		uuid, ok := listUUID(text)
		if !ok {
			return nil, &core.ParseError{File: src, Line: line, Value: text, Problem: "no UUID in", Allowed: "a line ending in (UUID: …)"}
		}
		head := strings.TrimSpace(text[:strings.LastIndex(text, "(UUID:")])
		switch {
		case strings.HasPrefix(head, "GPU "):
			num, _, _ := strings.Cut(strings.TrimPrefix(head, "GPU "), ":")
			idx, err := strconv.Atoi(strings.TrimSpace(num))
			if err != nil || idx < 0 {
				return nil, &core.ParseError{File: src, Line: line, Field: "GPU index", Value: num, Allowed: "an integer >= 0"}
			}
			parent = &Reading{Index: idx, UUID: uuid}
		case strings.HasPrefix(head, "MIG "):
			if parent == nil {
				return nil, &core.ParseError{File: src, Line: line, Value: text, Problem: "MIG device before any GPU in", Allowed: "a GPU line first"}
			}
			fields := strings.Fields(strings.TrimSuffix(head, ":"))
			// MIG <profile> Device <n>
			if len(fields) != 4 || fields[2] != "Device" {
				return nil, &core.ParseError{File: src, Line: line, Value: text, Problem: "malformed MIG line", Allowed: "MIG <profile> Device <n>: (UUID: MIG-…)"}
			}
			n, err := strconv.Atoi(fields[3])
			if err != nil || n < 0 {
				return nil, &core.ParseError{File: src, Line: line, Field: "MIG device", Value: fields[3], Allowed: "an integer >= 0"}
			}
			r := unknownReading()
			r.Index, r.UUID, r.Name = parent.Index, uuid, fields[1]
			r.MIG, r.ParentUUID, r.MIGIndex = true, parent.UUID, n
			migs = append(migs, r)
		default:
			return nil, &core.ParseError{File: src, Line: line, Value: text, Problem: "unexpected line", Allowed: "GPU … or MIG … lines"}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &core.ParseError{File: src, Line: line + 1, Problem: "unreadable line", Err: err}
	}
	return migs, nil
}

// listUUID returns the UUID of an nvidia-smi -L line.
func listUUID(text string) (string, bool) {
	i := strings.LastIndex(text, "(UUID:")
	if i < 0 || !strings.HasSuffix(text, ")") {
		return "", false
	}
	uuid := strings.TrimSpace(text[i+len("(UUID:") : len(text)-1])
	return uuid, uuid != "" && !strings.ContainsAny(uuid, " \t()")
}
