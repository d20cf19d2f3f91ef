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
const (
	EnvFakeUtil   = "GPUFLEET_FAKE_GPU_UTIL"
	EnvFakeMemMiB = "GPUFLEET_FAKE_GPU_MEM_MIB"
)

// fakeLoads is the fake source's Loads: the load each running job
// declares, on each GPU it is placed on, summed where jobs share a GPU.
// A job declares it in the environment of its process group's leader
// (gpufleet submit -- env GPUFLEET_FAKE_GPU_UTIL=90 ./train.sh), read
// from /proc; where that cannot be read the job puts no load.
func (a *agent) fakeLoads() map[int]gpu.Load {
	a.mu.Lock()
	inv := a.inventory
	a.mu.Unlock()
	out := map[int]gpu.Load{}
	for _, p := range a.runner.Running() {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PGID))
		if err != nil {
			continue
		}
		l, err := declaredLoad(env)
		if err != nil {
			a.warnLoad(p.ID, err)
			continue
		}
		for _, d := range p.GPUs {
			i, ok := deviceIndex(d, inv)
			if !ok {
				continue
			}
			cur := out[i]
			cur.UtilPct += l.UtilPct
			cur.MemMiB += l.MemMiB
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
func declaredLoad(environ []byte) (gpu.Load, error) {
	var l gpu.Load
	for _, kv := range bytes.Split(environ, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case EnvFakeUtil:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 100 {
				return gpu.Load{}, fmt.Errorf("%s: invalid value %q: want a percentage 0..100", EnvFakeUtil, v)
			}
			l.UtilPct = n
		case EnvFakeMemMiB:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return gpu.Load{}, fmt.Errorf("%s: invalid value %q: want MiB >= 0", EnvFakeMemMiB, v)
			}
			l.MemMiB = n
		}
	}
	return l, nil
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
