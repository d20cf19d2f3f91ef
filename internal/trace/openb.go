package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The openb files (alibaba/clusterdata, cluster-trace-gpu-v2023/csv/):
//
//	openb_node_list_*.csv  sn,cpu_milli,memory_mib,gpu,model
//	openb_pod_list_*.csv   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,
//	                       pod_phase,creation_time,deletion_time,scheduled_time
//
// Columns are matched by header name, in any order; a column we do not know
// is skipped, so a later release that adds one still reads. The multigpu
// pod files have only the first five pod columns: the rest are optional.

// Bounds on what a reader accepts. They are generous — the published files
// stay far inside them — and only there so that a corrupt file is rejected
// with a clear error instead of overflowing the simulator's sums.
const (
	// MaxOpenbCPUMilli is the largest CPU a node or pod may have: 1e9
	// milli-cores.
	MaxOpenbCPUMilli = 1_000_000_000
	// MaxOpenbMemMiB is the largest memory a node or pod may have: 1 EiB.
	MaxOpenbMemMiB = 1 << 40
	// MaxOpenbGPUs is the most GPUs a node may have or a pod may ask for.
	MaxOpenbGPUs = 64
	// MaxOpenbGPUMilli is the largest per-GPU share a pod may ask for: one
	// whole GPU.
	MaxOpenbGPUMilli = 1000
)

// NoTime marks a time column that is empty or absent in a pod row.
const NoTime int64 = -1

// OpenbNode is one row of an openb node list: a machine and its GPUs.
type OpenbNode struct {
	// Name is the node's serial name (the sn column), e.g. openb-node-0227.
	Name string
	// CPUMilli is the CPU capacity in milli-cores; MemMiB the RAM in MiB.
	CPUMilli int64
	MemMiB   int64
	// GPUs is the number of GPUs (0 for a CPU-only node).
	GPUs int
	// Model is the GPU type (G2, G3, T4, P100, V100M16, V100M32, A10…);
	// empty for a CPU-only node.
	Model string
}

// OpenbPod is one row of an openb pod list: what one pod asked for.
type OpenbPod struct {
	// Name is the pod's name, e.g. openb-pod-0017.
	Name string
	// CPUMilli (milli-cores) and MemMiB (MiB) are the host resources asked
	// for.
	CPUMilli int64
	MemMiB   int64
	// NumGPU is the number of GPUs asked for (0 for a CPU-only pod).
	NumGPU int
	// GPUMilli is the share of each GPU in thousandths (1000 = whole GPU);
	// the trace has fractions only when NumGPU is 1.
	GPUMilli int64
	// GPUSpec lists the GPU types the pod may run on (the gpu_spec column
	// split at "|"); nil means any.
	GPUSpec []string
	// QoS (LS, BE, Burstable, Guaranteed) and Phase (Running, Succeeded,
	// Failed, Pending) are as recorded; empty when the column is absent.
	QoS   string
	Phase string
	// CreationTime, DeletionTime and ScheduledTime are seconds from the
	// trace's (desensitised) origin, or NoTime.
	CreationTime  int64
	DeletionTime  int64
	ScheduledTime int64
}

// TotalGPUMilli is the pod's whole GPU request: NumGPU × GPUMilli.
func (p *OpenbPod) TotalGPUMilli() int64 { return int64(p.NumGPU) * p.GPUMilli }

// ParseError is an error in a trace file; see core.ParseError. Field is
// the column's header name.
type ParseError = core.ParseError

// LoadOpenbNodes reads an openb node list from a file.
func LoadOpenbNodes(path string) ([]OpenbNode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open node list: %w", err)
	}
	defer f.Close()
	return ReadOpenbNodes(f, path)
}

// LoadOpenbPods reads an openb pod list from a file.
func LoadOpenbPods(path string) ([]OpenbPod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open pod list: %w", err)
	}
	defer f.Close()
	return ReadOpenbPods(f, path)
}

// ReadOpenbNodes reads an openb node list (sn, cpu_milli, memory_mib, gpu,
// model; any order, with a header row). file names the input in errors.
// A node with GPUs must name their model; names must be unique.
func ReadOpenbNodes(r io.Reader, file string) ([]OpenbNode, error) {
	t, err := newTable(r, file, []string{"sn", "cpu_milli", "memory_mib", "gpu", "model"})
	if err != nil {
		return nil, err
	}
	var nodes []OpenbNode
	seen := map[string]int{}
	for {
		row, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		n := OpenbNode{
			Name:     row.text("sn"),
			CPUMilli: row.int("cpu_milli", 0, MaxOpenbCPUMilli),
			MemMiB:   row.int("memory_mib", 0, MaxOpenbMemMiB),
			GPUs:     int(row.int("gpu", 0, MaxOpenbGPUs)),
			Model:    row.text("model"),
		}
		if row.err != nil {
			return nil, row.err
		}
		if n.Name == "" {
			return nil, row.fail("sn", "", "empty name", "the node's name")
		}
		if first, dup := seen[n.Name]; dup {
			return nil, row.fail("sn", n.Name, "duplicate node", fmt.Sprintf("each node once (first on line %d)", first))
		}
		seen[n.Name] = row.line
		if n.GPUs > 0 && n.Model == "" {
			return nil, row.fail("model", "", "empty GPU model", fmt.Sprintf("the model of the node's %d GPUs", n.GPUs))
		}
		if strings.Contains(n.Model, "|") {
			return nil, row.fail("model", n.Model, "", "one GPU model, without |")
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// ReadOpenbPods reads an openb pod list (name, cpu_milli, memory_mib,
// num_gpu, gpu_milli and, optionally, gpu_spec, qos, pod_phase,
// creation_time, deletion_time, scheduled_time; any order, with a header
// row). file names the input in errors. A pod that asks for GPUs must ask
// for a share of each; names must be unique.
func ReadOpenbPods(r io.Reader, file string) ([]OpenbPod, error) {
	t, err := newTable(r, file, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"})
	if err != nil {
		return nil, err
	}
	var pods []OpenbPod
	seen := map[string]int{}
	for {
		row, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		p := OpenbPod{
			Name:          row.text("name"),
			CPUMilli:      row.int("cpu_milli", 0, MaxOpenbCPUMilli),
			MemMiB:        row.int("memory_mib", 0, MaxOpenbMemMiB),
			NumGPU:        int(row.int("num_gpu", 0, MaxOpenbGPUs)),
			GPUMilli:      row.int("gpu_milli", 0, MaxOpenbGPUMilli),
			GPUSpec:       splitSpec(row.text("gpu_spec")),
			QoS:           row.text("qos"),
			Phase:         row.text("pod_phase"),
			CreationTime:  row.time("creation_time"),
			DeletionTime:  row.time("deletion_time"),
			ScheduledTime: row.time("scheduled_time"),
		}
		if row.err != nil {
			return nil, row.err
		}
		if p.Name == "" {
			return nil, row.fail("name", "", "empty name", "the pod's name")
		}
		if first, dup := seen[p.Name]; dup {
			return nil, row.fail("name", p.Name, "duplicate pod", fmt.Sprintf("each pod once (first on line %d)", first))
		}
		seen[p.Name] = row.line
		if p.NumGPU > 0 && p.GPUMilli == 0 {
			return nil, row.fail("gpu_milli", "0", "", fmt.Sprintf("a share of 1..%d per GPU for a pod asking for %d GPUs", MaxOpenbGPUMilli, p.NumGPU))
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// splitSpec splits a gpu_spec cell ("V100M16|V100M32") into models,
// dropping empty parts; nil when none is left.
func splitSpec(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, m := range strings.Split(s, "|") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// table reads a CSV file with a header row, giving cells by column name.
type table struct {
	file  string
	r     *csv.Reader
	index map[string]int
	// width is the header's number of cells; a row with fewer is cut
	// short (a truncated file), never read with its last cells empty.
	width int
}

// newTable reads the header row. Names are matched ignoring case and
// surrounding space; every name in required must be there.
func newTable(r io.Reader, file string, required []string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	t := &table{file: file, r: cr, index: map[string]int{}}
	rec, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, &ParseError{File: file, Problem: "empty file", Allowed: "a header row naming the columns " + strings.Join(required, ",")}
	}
	if err != nil {
		return nil, t.syntax(err)
	}
	line, _ := cr.FieldPos(0)
	t.width = len(rec)
	for i, name := range rec {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff") // a spreadsheet's byte-order mark
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if _, dup := t.index[name]; dup {
			return nil, &ParseError{File: file, Line: line, Field: name, Problem: "duplicate column", Allowed: "each column once"}
		}
		t.index[name] = i
	}
	var missing []string
	for _, name := range required {
		if _, ok := t.index[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, &ParseError{File: file, Line: line, Problem: "missing columns", Value: strings.Join(missing, ","), Allowed: "a header with " + strings.Join(required, ",")}
	}
	return t, nil
}

// syntax turns a csv error into a ParseError at its line.
func (t *table) syntax(err error) error {
	var ce *csv.ParseError
	if errors.As(err, &ce) {
		return &ParseError{File: t.file, Line: ce.Line, Problem: "malformed CSV: " + ce.Err.Error(), Err: err}
	}
	return &ParseError{File: t.file, Problem: "read: " + err.Error(), Err: err}
}

// row is one record of a table. Its getters record the first bad cell in
// err and return a zero value, so a row is read in one expression and
// checked once.
type row struct {
	t    *table
	rec  []string
	line int
	err  error
}

// next reads the next non-blank record; io.EOF at the end.
func (t *table) next() (*row, error) {
	for {
		rec, err := t.r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, t.syntax(err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		line, _ := t.r.FieldPos(0)
		if len(rec) < t.width {
			return nil, &ParseError{File: t.file, Line: line, Problem: "short row", Value: fmt.Sprintf("%d cells", len(rec)),
				Allowed: fmt.Sprintf("%d cells, one per header column (a truncated file?)", t.width)}
		}
		return &row{t: t, rec: rec, line: line}, nil
	}
}

// text is the trimmed cell of the named column; "" when the column or the
// cell is absent.
func (r *row) text(col string) string {
	i, ok := r.t.index[col]
	if !ok || i >= len(r.rec) {
		return ""
	}
	return strings.TrimSpace(r.rec[i])
}

// int parses the named column as an integer in lo..hi.
func (r *row) int(col string, lo, hi int64) int64 {
	s := r.text(col)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		r.record(col, s, fmt.Sprintf("an integer %d..%d", lo, hi))
		return 0
	}
	return v
}

// time parses the named column as seconds >= 0, or NoTime when empty or
// absent.
func (r *row) time(col string) int64 {
	s := r.text(col)
	if s == "" {
		return NoTime
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		r.record(col, s, "seconds, an integer >= 0, or empty")
		return NoTime
	}
	return v
}

// record keeps the first bad cell of the row.
func (r *row) record(col, value, allowed string) {
	if r.err == nil {
		r.err = r.fail(col, value, "", allowed)
	}
}

// fail is a ParseError at this row.
func (r *row) fail(col, value, problem, allowed string) error {
	return &ParseError{File: r.t.file, Line: r.line, Field: col, Value: value, Problem: problem, Allowed: allowed}
}
