//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML reads GPUs through the NVIDIA Management Library, the library
// nvidia-smi itself is built on. It is the best source when it loads: no
// process per sample, per-process memory and SM utilization, MIG devices
// with their own memory and processes.
type NVML struct {
	lib nvml.Interface

	mu sync.Mutex
	// lastUtilTS is, per device UUID, the newest process-utilization
	// sample already seen, so each Sample reads only newer ones.
	lastUtilTS map[string]uint64
}

var _ Source = (*NVML)(nil)

// NewNVML loads and initializes NVML. On a machine without the NVIDIA
// driver it returns an error wrapping ErrUnavailable that says
// "nvml unavailable".
func NewNVML() (*NVML, error) { return newNVML(nvml.New()) }

// newNVML initializes lib, the real library or go-nvml's mock.
func newNVML(lib nvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, unavailable("nvml unavailable: init: %s", ret.Error())
	}
	return &NVML{lib: lib, lastUtilTS: map[string]uint64{}}, nil
}

// Name returns "nvml".
func (*NVML) Name() string { return "nvml" }

// Close shuts NVML down.
func (n *NVML) Close() error {
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %s", ret.Error())
	}
	return nil
}

// fatal reports whether ret means the whole sample is wrong, not just one
// value missing: the library or the GPU is gone.
func fatal(ret nvml.Return) bool {
	switch ret {
	case nvml.ERROR_UNINITIALIZED, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_GPU_IS_LOST, nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_RESET_REQUIRED:
		return true
	}
	return false
}

// Sample reads every device and, on those in MIG mode, every MIG device.
func (n *NVML) Sample(ctx context.Context) ([]Reading, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: device count: %s", ret.Error())
	}
	var out []Reading
	for i := 0; i < count; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("nvml: %w", err)
		}
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: device %d: handle: %s", i, ret.Error())
		}
		r, err := n.read(dev, i)
		if err != nil {
			return nil, fmt.Errorf("nvml: device %d: %w", i, err)
		}
		out = append(out, r)
		migs, err := n.readMIG(dev, r)
		if err != nil {
			return nil, fmt.Errorf("nvml: device %d: %w", i, err)
		}
		out = append(out, migs...)
	}
	return out, nil
}

// read reads one device handle, physical or MIG.
func (n *NVML) read(dev nvml.Device, index int) (Reading, error) {
	r := unknownReading()
	r.Index = index
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return r, fmt.Errorf("uuid: %s", ret.Error())
	}
	r.UUID = uuid
	if name, ret := dev.GetName(); ret == nvml.SUCCESS {
		r.Name = name
	} else if fatal(ret) {
		return r, fmt.Errorf("name: %s", ret.Error())
	}
	if u, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS && u.Gpu <= 100 {
		r.UtilPct = int(u.Gpu)
	} else if fatal(ret) {
		return r, fmt.Errorf("utilization: %s", ret.Error())
	}
	if m, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		r.MemUsedMiB, r.MemTotalMiB = int64(m.Used>>20), int64(m.Total>>20)
	} else if fatal(ret) {
		return r, fmt.Errorf("memory: %s", ret.Error())
	}
	if mw, ret := dev.GetPowerUsage(); ret == nvml.SUCCESS {
		r.PowerW = int(math.Round(float64(mw) / 1000))
	} else if fatal(ret) {
		return r, fmt.Errorf("power: %s", ret.Error())
	}
	if c, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		r.TempC = int(c)
	} else if fatal(ret) {
		return r, fmt.Errorf("temperature: %s", ret.Error())
	}
	procs, ret := dev.GetComputeRunningProcesses()
	switch {
	case ret == nvml.SUCCESS:
		r.ProcessesKnown = true
		for _, p := range procs {
			mem := int64(Unknown)
			// NVML_VALUE_NOT_AVAILABLE (all ones) when the driver cannot
			// attribute memory, as under WDDM or without permission.
			if p.UsedGpuMemory != math.MaxUint64 {
				mem = int64(p.UsedGpuMemory >> 20)
			}
			r.Processes = append(r.Processes, Process{PID: int(p.Pid), UsedMemMiB: mem, SMUtilPct: Unknown})
		}
	case fatal(ret):
		return r, fmt.Errorf("processes: %s", ret.Error())
	}
	if len(r.Processes) > 0 {
		n.processUtil(dev, &r)
	}
	return r, nil
}

// processUtil fills SMUtilPct from the samples NVML buffered since the
// last call: the newest sample of each process.
func (n *NVML) processUtil(dev nvml.Device, r *Reading) {
	samples, ret := dev.GetProcessUtilization(n.lastUtilTS[r.UUID])
	if ret != nvml.SUCCESS {
		return // NOT_FOUND (no sample since), NOT_SUPPORTED: stay Unknown
	}
	type latest struct {
		ts   uint64
		util uint32
	}
	byPID := map[uint32]latest{}
	for _, s := range samples {
		if l, ok := byPID[s.Pid]; !ok || s.TimeStamp >= l.ts {
			byPID[s.Pid] = latest{s.TimeStamp, s.SmUtil}
		}
		if s.TimeStamp > n.lastUtilTS[r.UUID] {
			n.lastUtilTS[r.UUID] = s.TimeStamp
		}
	}
	for i := range r.Processes {
		if l, ok := byPID[uint32(r.Processes[i].PID)]; ok && l.util <= 100 {
			r.Processes[i].SMUtilPct = int(l.util)
		}
	}
}

// readMIG reads the MIG devices of parent when it is in MIG mode.
func (n *NVML) readMIG(dev nvml.Device, parent Reading) ([]Reading, error) {
	current, _, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS || current != nvml.DEVICE_MIG_ENABLE {
		return nil, nil // NOT_SUPPORTED on GPUs without MIG
	}
	max, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("mig device count: %s", ret.Error())
	}
	var out []Reading
	for j := 0; j < max; j++ {
		mig, ret := dev.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("mig device %d: handle: %s", j, ret.Error())
		}
		r, err := n.read(mig, parent.Index)
		if err != nil {
			return nil, fmt.Errorf("mig device %d: %w", j, err)
		}
		r.MIG, r.ParentUUID, r.MIGIndex = true, parent.UUID, j
		// MIG devices have no power or temperature of their own; NVML
		// answers for the parent or not at all.
		r.PowerW, r.TempC = Unknown, Unknown
		out = append(out, r)
	}
	return out, nil
}
