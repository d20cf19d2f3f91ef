package trace

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Alibaba PAI 2020 trace (alibaba/clusterdata, cluster-trace-gpu-v2020,
// the NSDI'22 "MLaaS in the Wild" data). Two of its tables make a job
// trace:
//
//	pai_job_table   job_name,inst_id,user,status,start_time,end_time
//	pai_task_table  job_name,task_name,inst_num,status,start_time,end_time,
//	                plan_cpu,plan_mem,plan_gpu,gpu_type
//
// The released .csv files have no header row (the column names ship in
// separate .header files): a file whose first line has a job_name cell is
// read by its header, in any column order; any other is read in the
// fixed order above. Numbers are written as decimals ("4550879.0", "29.296875"); an
// empty cell or NaN is "not recorded". Times are seconds from a
// desensitised origin that keeps the time of day and the weekday in
// UTC+8 (Asia/Shanghai); 0 is "not recorded" too, as in the release's
// own analysis scripts.
//
// A job's submit time is its job-table start_time. Its duration runs
// from its earliest task start to its latest task end (the gap after the
// submit time is queueing, which replay decides anew). plan_gpu is per
// instance, in percent of a GPU (50 = half, 100 = one, 800 = eight); the
// job's GPU demand is Σ inst_num × plan_gpu over its tasks, taken as one
// gang: a total of at most one GPU is a single shared GPU of that share
// (GPUMilli = total), more is rounded up to whole GPUs. plan_cpu
// (percent of a core) and plan_mem (GB) add up the same way. gpu_type is
// where PAI placed the task, not what it asked for; it becomes the job's
// model constraint only when all of its GPU tasks ran on one named type
// (MISC, older GPUs, and empty are no constraint).

// PAIZone is the time zone in which PAI times keep their time of day:
// UTC+8.
var PAIZone = time.FixedZone("UTC+8", 8*3600)

// The PAI tables' columns in the released files' fixed order.
var (
	PAIJobColumns  = []string{"job_name", "inst_id", "user", "status", "start_time", "end_time"}
	PAITaskColumns = []string{"job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"}
)

// MaxPAIInstances is the most instances one PAI task may have.
const MaxPAIInstances = 100_000

// PAIJob is one row of pai_job_table.
type PAIJob struct {
	// Name is the (desensitised) job name, the key tasks refer to.
	Name string
	// InstID is the job's instance id (the release says to treat it as
	// the job id); User the user name.
	InstID string
	User   string
	// Status is Terminated (succeeded), Failed, Running or Waiting.
	Status string
	// Start is the submission time and End the completion time, in the
	// trace's seconds, or NoTime when not recorded.
	Start, End int64
}

// PAITask is one row of pai_task_table: a role of a job (worker, ps,
// evaluator…) with its instances. Resources are per instance.
type PAITask struct {
	// Job is the job's name; Task the task's (its role).
	Job, Task string
	// Instances is the number of instances (inst_num; 1 when empty).
	Instances int64
	// Status is the task's status, as for jobs.
	Status string
	// Start and End are the task's launch and completion times, or
	// NoTime.
	Start, End int64
	// CPUMilli is plan_cpu in milli-cores (600% = 6000).
	CPUMilli int64
	// MemMiB is plan_mem in MiB (GB × 1024, rounded).
	MemMiB int64
	// GPUMilli is plan_gpu in milli-GPUs (50% = 500, 800% = 8000).
	GPUMilli int64
	// GPUType is the GPU type the task ran on (V100, P100, T4, MISC…).
	GPUType string
}

// LoadPAI reads a PAI trace from its job table and task table files.
func LoadPAI(jobsPath, tasksPath string) (Trace, error) {
	jf, err := os.Open(jobsPath)
	if err != nil {
		return Trace{}, fmt.Errorf("open pai job table: %w", err)
	}
	defer jf.Close()
	tf, err := os.Open(tasksPath)
	if err != nil {
		return Trace{}, fmt.Errorf("open pai task table: %w", err)
	}
	defer tf.Close()
	return ReadPAI(jf, jobsPath, tf, tasksPath)
}

// ReadPAI reads a PAI job table and task table and joins them into a
// trace named jobsFile (see JoinPAI). Errors are *ParseError values
// naming the file, line, column and value.
func ReadPAI(jobs io.Reader, jobsFile string, tasks io.Reader, tasksFile string) (Trace, error) {
	js, err := ReadPAIJobs(jobs, jobsFile)
	if err != nil {
		return Trace{}, err
	}
	ts, err := ReadPAITasks(tasks, tasksFile)
	if err != nil {
		return Trace{}, err
	}
	return JoinPAI(jobsFile, js, ts), nil
}

// ReadPAIJobs reads pai_job_table, headerless or with a header. Job
// names must be unique.
func ReadPAIJobs(r io.Reader, file string) ([]PAIJob, error) {
	t, headerless, err := paiTable(r, file, PAIJobColumns, "job_name", "start_time")
	if err != nil {
		return nil, err
	}
	var jobs []PAIJob
	seen := map[string]int{}
	for {
		row, err := t.paiNext(PAIJobColumns, headerless)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		j := PAIJob{
			Name:   row.name("job_name"),
			InstID: row.name("inst_id"),
			User:   row.name("user"),
			Status: row.name("status"),
			Start:  row.paiTime("start_time"),
			End:    row.paiTime("end_time"),
		}
		if row.err != nil {
			return nil, row.err
		}
		if j.Name == "" {
			return nil, row.fail("job_name", "", "empty name", "the job's name")
		}
		if first, dup := seen[j.Name]; dup {
			return nil, row.fail("job_name", j.Name, "duplicate job", fmt.Sprintf("each job once (first on line %d)", first))
		}
		seen[j.Name] = row.line
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// ReadPAITasks reads pai_task_table, headerless or with a header.
func ReadPAITasks(r io.Reader, file string) ([]PAITask, error) {
	t, headerless, err := paiTable(r, file, PAITaskColumns, "job_name", "start_time", "end_time", "plan_gpu")
	if err != nil {
		return nil, err
	}
	var tasks []PAITask
	for {
		row, err := t.paiNext(PAITaskColumns, headerless)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		k := PAITask{
			Job:       row.name("job_name"),
			Task:      row.name("task_name"),
			Instances: 1,
			Status:    row.name("status"),
			Start:     row.paiTime("start_time"),
			End:       row.paiTime("end_time"),
			CPUMilli:  row.decimal("plan_cpu", 1, MaxOpenbCPUMilli, "a share of CPU cores in percent (600 = 6 cores)"),
			GPUMilli:  row.decimal("plan_gpu", 1, MaxGPUs*1000, fmt.Sprintf("a share of GPUs in percent, 0..%d (50 = half a GPU, 800 = eight)", MaxGPUs*100)),
			GPUType:   row.name("gpu_type"),
		}
		if micro := row.decimal("plan_mem", 6, MaxOpenbMemMiB*1_000_000/1024, "memory in GB (29.296875)"); micro > 0 {
			k.MemMiB = (micro*1024 + 500_000) / 1_000_000
		}
		if !row.empty("inst_num") {
			k.Instances = row.decimal("inst_num", 0, MaxPAIInstances, fmt.Sprintf("a whole number of instances 0..%d", MaxPAIInstances))
		}
		if row.err != nil {
			return nil, row.err
		}
		if k.Job == "" {
			return nil, row.fail("job_name", "", "empty name", "the name of the task's job")
		}
		tasks = append(tasks, k)
	}
	return tasks, nil
}

// JoinPAI joins PAI jobs with their tasks into a trace called name. The
// trace's Start is the earliest submit time, in PAIZone. Jobs that cannot
// be replayed — no submit time, no tasks, never started or never ended,
// more GPUs than MaxGPUs — and tasks of jobs not in the job table are
// listed in Skipped with their reasons.
func JoinPAI(name string, jobs []PAIJob, tasks []PAITask) Trace {
	out := Trace{Name: name}
	byJob := map[string][]int{}
	index := map[string]bool{}
	for _, j := range jobs {
		index[j.Name] = true
	}
	for i, k := range tasks {
		if !index[k.Job] {
			out.Skipped = append(out.Skipped, Skip{ID: k.Job + "/" + k.Task, Reason: "task of a job not in the job table"})
			continue
		}
		byJob[k.Job] = append(byJob[k.Job], i)
	}
	done := map[string]bool{}
	var abs []int64 // each kept job's submit time, in the file's seconds
	for _, pj := range jobs {
		if done[pj.Name] {
			out.Skipped = append(out.Skipped, Skip{ID: pj.Name, Reason: "duplicate job"})
			continue
		}
		done[pj.Name] = true
		j, submit, reason := paiJob(pj, byJob[pj.Name], tasks)
		if reason != "" {
			out.Skipped = append(out.Skipped, Skip{ID: pj.Name, Reason: reason})
			continue
		}
		out.Jobs = append(out.Jobs, j)
		abs = append(abs, submit)
	}
	if len(abs) == 0 {
		return out
	}
	t0 := slices.Min(abs)
	kept := out.Jobs[:0]
	for i, j := range out.Jobs {
		if abs[i]-t0 > MaxSeconds {
			out.Skipped = append(out.Skipped, Skip{ID: j.ID, Reason: "submitted over 100 years after the first job"})
			continue
		}
		j.Submit = abs[i] - t0
		kept = append(kept, j)
	}
	out.Jobs = kept
	out.Start = time.Unix(t0, 0).In(PAIZone)
	sortJobs(out.Jobs)
	return out
}

// paiJob makes one job from its row and its tasks, or says why not. It
// returns the job (Submit not yet relative), its absolute submit time and
// a skip reason ("" when kept).
func paiJob(pj PAIJob, idx []int, tasks []PAITask) (Job, int64, string) {
	if pj.Start == NoTime {
		return Job{}, 0, "no submit time"
	}
	if len(idx) == 0 {
		return Job{}, 0, "no tasks"
	}
	start, end := NoTime, NoTime
	var gpu, cpu, mem int64
	types := map[string]bool{}
	for _, i := range idx {
		k := &tasks[i]
		if k.Start != NoTime && (start == NoTime || k.Start < start) {
			start = k.Start
		}
		if k.End != NoTime && k.End > end {
			end = k.End
		}
		gpu = capAdd(gpu, k.Instances*k.GPUMilli, int64(MaxGPUs+1)*1000)
		cpu = capAdd(cpu, k.Instances*k.CPUMilli, MaxOpenbCPUMilli)
		mem = capAdd(mem, k.Instances*k.MemMiB, MaxOpenbMemMiB)
		if k.GPUMilli > 0 && k.Instances > 0 {
			types[k.GPUType] = true
		}
	}
	switch {
	case start == NoTime:
		return Job{}, 0, "never started (no task start time)"
	case end == NoTime:
		return Job{}, 0, "unfinished (no task end time)"
	case end < start:
		return Job{}, 0, "ended before it started"
	case end-start > MaxSeconds:
		return Job{}, 0, "ran over 100 years"
	}
	j := Job{
		ID:       pj.Name,
		User:     pj.User,
		Status:   pj.Status,
		Duration: end - start,
		CPUMilli: cpu,
		MemMiB:   mem,
	}
	switch {
	case gpu == 0:
	case gpu <= 1000:
		j.GPUs, j.GPUMilli = 1, gpu
	case gpu > int64(MaxGPUs)*1000:
		return Job{}, 0, fmt.Sprintf("asks for more than %d GPUs", MaxGPUs)
	default:
		j.GPUs, j.GPUMilli = int((gpu+999)/1000), 1000
	}
	if len(types) == 1 {
		for m := range types {
			if m != "" && !strings.EqualFold(m, "MISC") && !strings.Contains(m, "|") {
				j.Models = []string{m}
			}
		}
	}
	return j, pj.Start, ""
}

// capAdd adds a and b (both >= 0), stopping at hi.
func capAdd(a, b, hi int64) int64 {
	if b > hi-a {
		return hi
	}
	return a + b
}

// paiTable reads a PAI table's optional header: a first line with a
// job_name cell names the file's columns (required must be among them);
// otherwise they are cols in order, and headerless is true. (A data row
// never has that cell: job names are hex digests.)
func paiTable(r io.Reader, file string, cols []string, required ...string) (t *table, headerless bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(4096)
	first, _, _ := strings.Cut(strings.TrimPrefix(string(head), "\ufeff"), "\n")
	if slices.ContainsFunc(strings.Split(first, ","), func(c string) bool {
		return strings.EqualFold(strings.Trim(c, "\" \t\r"), "job_name")
	}) {
		t, err := newTable(br, file, required)
		return t, false, err
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	t = &table{file: file, r: cr, index: map[string]int{}}
	for i, c := range cols {
		t.index[c] = i
	}
	return t, true, nil
}

// paiNext is next, checking that a headerless row has every column.
func (t *table) paiNext(cols []string, headerless bool) (*row, error) {
	row, err := t.next()
	if err != nil {
		return nil, err
	}
	if headerless && len(row.rec) != len(cols) {
		return nil, &ParseError{File: t.file, Line: row.line, Value: strconv.Itoa(len(row.rec)), Problem: "wrong number of fields",
			Allowed: fmt.Sprintf("%d fields (%s), or a header row", len(cols), strings.Join(cols, ","))}
	}
	return row, nil
}

// empty reports whether the named cell is empty, absent or NaN (how
// pandas writes a missing number).
func (r *row) empty(col string) bool {
	switch strings.ToLower(r.text(col)) {
	case "", "nan", "null", "none":
		return true
	}
	return false
}

// paiTime parses a time in seconds ("4550879.0", rounded to the second);
// NoTime when empty, NaN or 0.
func (r *row) paiTime(col string) int64 {
	if r.empty(col) {
		return NoTime
	}
	s := r.text(col)
	v, _, ok := parseFixed(s, 0)
	if !ok || v > maxUnix {
		r.record(col, s, "seconds >= 0 as a decimal (4550879.0), or empty")
		return NoTime
	}
	if v == 0 {
		return NoTime
	}
	return v
}

// decimal parses the named cell as a decimal >= 0 scaled by 10^scale and
// rounded half up; 0 when empty or NaN. With scale 0 the value must be a
// whole number. hi bounds the scaled value.
func (r *row) decimal(col string, scale int, hi int64, allowed string) int64 {
	if r.empty(col) {
		return 0
	}
	s := r.text(col)
	v, exact, ok := parseFixed(s, scale)
	if !ok || v > hi || (scale == 0 && !exact) {
		r.record(col, s, allowed)
		return 0
	}
	return v
}

// parseFixed parses an unsigned decimal ("12", "0.5", ".25", "3.", "+1")
// into round(value × 10^scale), rounding half up. exact is false when
// nonzero digits were rounded away. Exponents, signs other than +, and
// values of more than 15 integer digits
// (or 18 digits once scaled) are refused.
func parseFixed(s string, scale int) (v int64, exact, ok bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "+")
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return 0, false, false
	}
	intPart = strings.TrimLeft(intPart, "0")
	if len(intPart) > 15 || len(intPart)+scale > 18 {
		return 0, false, false
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, false, false
			}
		}
	}
	for i := 0; i < len(intPart); i++ {
		v = v*10 + int64(intPart[i]-'0')
	}
	exact = true
	for i := 0; i < scale; i++ {
		v *= 10
		if i < len(frac) {
			v += int64(frac[i] - '0')
		}
	}
	if len(frac) > scale {
		rest := frac[scale:]
		if rest[0] >= '5' {
			v++
		}
		exact = strings.Trim(rest, "0") == ""
	}
	return v, exact, true
}
