package agent

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/agent/gpu"
	"github.com/gpufleet/gpufleet/internal/agent/link"
)

// The variables by which a job declares the load it puts on each of its
// GPUs under the fake GPU source: utilization 0..100 and MiB of memory
// held. A job that declares none (a sleep) puts none.
//
// EnvFakeProcs=0 declares that the job holds no process on its GPUs
// (its GPU work ended, or never began, while the job lives on): the
// agent then reports no process of the run on them, and the server's
// zombie rung fires after idle.zombie_after. 1 (the default) lists the
// job's process group leader on each of its GPUs.
const (
	EnvFakeUtil   = "GPUFLEET_FAKE_GPU_UTIL"
	EnvFakeMemMiB = "GPUFLEET_FAKE_GPU_MEM_MIB"
	EnvFakeProcs  = "GPUFLEET_FAKE_GPU_PROCS"
)

// fakeDecl is what a job declares of itself to the fake GPU source.
type fakeDecl struct {
	Load gpu.Load
	// NoGPUProcess: the job holds no process on its GPUs.
	NoGPUProcess bool
}

// fakeLoads is the fake source's Loads: the load each running job
// declares, on each GPU it is placed on, summed where jobs share a GPU,
// and the jobs' process groups as the GPUs' processes. A job declares it
// in the environment of its process group's leader (gpufleet submit --
// env GPUFLEET_FAKE_GPU_UTIL=90 ./train.sh), read from /proc; where that
// cannot be read the job puts no load but is listed on its GPUs (no
// zombie is made of an unreadable environment).
func (a *agent) fakeLoads() map[int]gpu.Load {
	a.mu.Lock()
	inv := a.inventory
	a.mu.Unlock()
	out := map[int]gpu.Load{}
	for _, p := range a.runner.Running() {
		var d fakeDecl
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PGID)); err == nil {
			if d, err = declaredLoad(env); err != nil {
				a.warnLoad(p.ID, err)
				d = fakeDecl{}
			}
		}
		for _, dev := range p.GPUs {
			i, ok := deviceIndex(dev, inv)
			if !ok {
				continue
			}
			cur := out[i]
			cur.UtilPct += d.Load.UtilPct
			cur.MemMiB += d.Load.MemMiB
			if !d.NoGPUProcess {
				cur.PIDs = append(cur.PIDs, p.PGID)
			}
			out[i] = cur
		}
	}
	return out
}

// warnLoad logs a job's bad load declaration once.
func (a *agent) warnLoad(job string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.badLoad == nil {
		a.badLoad = map[string]bool{}
	}
	if !a.badLoad[job] {
		a.badLoad[job] = true
		a.log.Warn("fake gpu source: the job's declared load is ignored", "job", job, "err", err)
	}
}

// declaredLoad reads the fake load from a NUL-separated environment
// block, as /proc/PID/environ holds it.
func declaredLoad(environ []byte) (fakeDecl, error) {
	var d fakeDecl
	l := &d.Load
	for _, kv := range bytes.Split(environ, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case EnvFakeUtil:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 100 {
				return fakeDecl{}, fmt.Errorf("%s: invalid value %q: want a percentage 0..100", EnvFakeUtil, v)
			}
			l.UtilPct = n
		case EnvFakeMemMiB:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return fakeDecl{}, fmt.Errorf("%s: invalid value %q: want MiB >= 0", EnvFakeMemMiB, v)
			}
			l.MemMiB = n
		case EnvFakeProcs:
			if v != "0" && v != "1" {
				return fakeDecl{}, fmt.Errorf("%s: invalid value %q: want 0 (no GPU process: a zombie) or 1", EnvFakeProcs, v)
			}
			d.NoGPUProcess = v == "0"
		}
	}
	return d, nil
}

// deviceIndex maps a CUDA_VISIBLE_DEVICES entry (an index or a GPU's
// UUID) to the GPU's index.
func deviceIndex(d string, inv []link.GPUInfo) (int, bool) {
	if i, err := strconv.Atoi(d); err == nil {
		return i, i >= 0
	}
	for _, g := range inv {
		if g.UUID == d && !g.MIG {
			return g.Index, true
		}
	}
	return 0, false
}
