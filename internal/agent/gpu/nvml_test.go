//go:build cgo

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
)

// telemetry is what a test makes one mock device report. go-nvml's mock
// servers model inventory (names, UUIDs, memory, MIG profiles); the live
// counters are the test's to choose.
type telemetry struct {
	util     uint32
	powerMW  uint32
	tempC    uint32
	usedMiB  uint64
	procs    []nvml.ProcessInfo
	smUtil   map[uint32]uint32 // pid → SM %
	noUtil   bool              // utilization NOT_SUPPORTED
	lostUtil bool              // utilization GPU_IS_LOST
}

func wire(d *server.Device, tm telemetry) {
	d.MemoryInfo.Used = tm.usedMiB << 20
	d.MemoryInfo.Free = d.MemoryInfo.Total - d.MemoryInfo.Used
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		switch {
		case tm.lostUtil:
			return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
		case tm.noUtil:
			return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.Utilization{Gpu: tm.util, Memory: tm.util / 2}, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return tm.powerMW, nvml.SUCCESS }
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return tm.tempC, nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return tm.procs, nvml.SUCCESS }
	d.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		var out []nvml.ProcessUtilizationSample
		for pid, sm := range tm.smUtil {
			if ts := uint64(1000 + pid); ts > since {
				out = append(out, nvml.ProcessUtilizationSample{Pid: pid, TimeStamp: ts, SmUtil: sm})
			}
		}
		if len(out) == 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return out, nvml.SUCCESS
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
}

func TestNVMLOnDGXH100Mock(t *testing.T) {
	srv := dgxh100.New()
	for i, d := range srv.Devices {
		tm := telemetry{util: uint32(10 * i), powerMW: 350_400 + uint32(i), tempC: uint32(40 + i), usedMiB: uint64(1024 * i)}
		if i == 3 {
			tm.procs = []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 3 << 30}, {Pid: 4243, UsedGpuMemory: math.MaxUint64}}
			tm.smUtil = map[uint32]uint32{4242: 88}
		}
		if i == 5 {
			tm.noUtil = true
		}
		wire(d.(*server.Device), tm)
	}
	src, err := newNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := src.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("got %d readings, want the mock's 8 GPUs", len(got))
	}
	for i, r := range got {
		d := srv.Devices[i].(*server.Device)
		wantUtil := 10 * i
		if i == 5 {
			wantUtil = Unknown
		}
		want := Reading{
			Index: i, UUID: d.UUID, Name: "NVIDIA H100 80GB HBM3", UtilPct: wantUtil,
			MemUsedMiB: int64(1024 * i), MemTotalMiB: 81920, PowerW: 350, TempC: 40 + i,
			ProcessesKnown: true,
		}
		if i == 3 {
			want.Processes = []Process{{PID: 4242, UsedMemMiB: 3072, SMUtilPct: 88}, {PID: 4243, UsedMemMiB: Unknown, SMUtilPct: Unknown}}
		}
		if d := cmp.Diff(want, r); d != "" {
			t.Errorf("GPU %d (-want +got)\n%s", i, d)
		}
	}
	// Process utilization is read incrementally: a second sample sees no
	// newer sample for pid 4242, so its SM share is not reported twice.
	again, err := src.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sm := again[3].Processes[0].SMUtilPct; sm != Unknown {
		t.Errorf("second sample: pid 4242 SM %d, want Unknown (no newer NVML sample)", sm)
	}
}

// TestNVMLMIGOnDGXA100Mock puts GPU 0 of go-nvml's DGX A100 mock in MIG
// mode, creates GPU instances from the mock's own profiles and serves
// them as MIG device handles.
func TestNVMLMIGOnDGXA100Mock(t *testing.T) {
	srv := dgxa100.New()
	for _, d := range srv.Devices {
		wire(d.(*server.Device), telemetry{util: 50, powerMW: 90_000, tempC: 33, usedMiB: 100})
	}
	gpu0 := srv.Devices[0].(*server.Device)
	if ret, _ := gpu0.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatalf("SetMigMode: %v", ret)
	}
	gpu0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	var migs []nvml.Device
	for k, profile := range []int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE} {
		info, ret := gpu0.GetGpuInstanceProfileInfo(profile)
		if ret != nvml.SUCCESS {
			t.Fatalf("profile %d: %v", profile, ret)
		}
		if _, ret := gpu0.CreateGpuInstance(&info); ret != nvml.SUCCESS {
			t.Fatalf("create instance: %v", ret)
		}
		uuid := fmt.Sprintf("MIG-%d-%s", k, gpu0.UUID[4:])
		mem := info.MemorySizeMB
		pid := uint32(9000 + k)
		migs = append(migs, &mock.Device{
			GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetNameFunc: func() (string, nvml.Return) {
				return fmt.Sprintf("NVIDIA A100-SXM4-40GB MIG %dg", info.SliceCount), nvml.SUCCESS
			},
			GetUtilizationRatesFunc:   func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED },
			GetMemoryInfoFunc:         func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: mem << 20, Used: 512 << 20}, nvml.SUCCESS },
			GetPowerUsageFunc:         func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
			GetTemperatureFunc:        func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
			GetProcessUtilizationFunc: func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED },
			GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
				return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: 512 << 20}}, nvml.SUCCESS
			},
		})
	}
	gpu0.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j < len(migs) {
			return migs[j], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	src, err := newNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range got[:4] {
		lines = append(lines, fmt.Sprintf("%d mig=%v idx=%d util=%d mem=%d/%d power=%d procs=%v", r.Index, r.MIG, r.MIGIndex, r.UtilPct, r.MemUsedMiB, r.MemTotalMiB, r.PowerW, r.Processes))
	}
	want := []string{
		"0 mig=false idx=0 util=-1 mem=100/40960 power=90 procs=[]",
		"0 mig=true idx=0 util=-1 mem=512/19968 power=-1 procs=[{9000 512 -1}]",
		"0 mig=true idx=1 util=-1 mem=512/4864 power=-1 procs=[{9001 512 -1}]",
		"1 mig=false idx=0 util=50 mem=100/40960 power=90 procs=[]",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got[1].ParentUUID != gpu0.UUID || !strings.HasPrefix(got[1].UUID, "MIG-") {
		t.Errorf("MIG device: parent %q uuid %q; want parent %q and a MIG- uuid", got[1].ParentUUID, got[1].UUID, gpu0.UUID)
	}
	if len(got) != 8+2 {
		t.Errorf("got %d readings, want 8 GPUs and 2 MIG devices", len(got))
	}
}

func TestNVMLErrors(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := newNVML(lib)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "nvml unavailable") || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("init failure: err = %v, want nvml unavailable … ERROR_LIBRARY_NOT_FOUND wrapping ErrUnavailable", err)
	}

	srv := dgxh100.New()
	for _, d := range srv.Devices {
		wire(d.(*server.Device), telemetry{})
	}
	wire(srv.Devices[2].(*server.Device), telemetry{lostUtil: true})
	src, err := newNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Sample(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nvml: device 2: utilization: ERROR_GPU_IS_LOST") {
		t.Errorf("lost GPU: err = %v, want nvml: device 2: utilization: ERROR_GPU_IS_LOST", err)
	}
}

// TestNVMLReal loads the machine's own NVML. Without a driver (CI, this
// project's build machines) it must fail as unavailable; with one it must
// read at least one GPU.
func TestNVMLReal(t *testing.T) {
	src, err := NewNVML()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "nvml unavailable") {
			t.Fatalf("err = %v, want nvml unavailable wrapping ErrUnavailable", err)
		}
		t.Logf("no NVML here: %v", err)
		return
	}
	defer src.Close()
	rs, err := src.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatal("NVML loaded but reported no GPU")
	}
	for _, r := range rs {
		t.Logf("%+v", r)
	}
}
