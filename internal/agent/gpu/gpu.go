package gpu

import (
	"context"
	"errors"
	"fmt"
)

// Unknown marks a numeric field of a Reading that the source could not
// tell (nvidia-smi's [N/A] and [Not Supported], NVML's NOT_SUPPORTED, a
// metric the exporter did not publish).
const Unknown = -1

// ErrUnavailable is what errors.Is finds in the error of a source that
// cannot run on this machine: no driver, no library, no binary, no
// endpoint. Open's "auto" moves on past such a source.
var ErrUnavailable = errors.New("gpu: source unavailable")

// unavailableError says why a source is unavailable and is ErrUnavailable
// to errors.Is, without repeating ErrUnavailable's text.
type unavailableError struct{ msg string }

// Error returns why the source is unavailable.
func (e *unavailableError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// unavailable formats an error that is ErrUnavailable to errors.Is.
func unavailable(format string, args ...any) error {
	return &unavailableError{msg: fmt.Sprintf(format, args...)}
}

// Source is one way of reading the GPUs of this machine.
type Source interface {
	// Name is the source's flag value: nvml, nvidia-smi, dcgm or fake.
	Name() string
	// Sample reads every GPU once. Readings are ordered by Index, each
	// physical GPU before its MIG devices.
	Sample(ctx context.Context) ([]Reading, error)
	// Close releases what the source holds (NVML's handle).
	Close() error
}

// Reading is one GPU, or one MIG device, at one time.
type Reading struct {
	// Index is the GPU's index as nvidia-smi and NVML number it; a MIG
	// device carries its parent's index.
	Index int
	// UUID is GPU-… for a physical GPU and MIG-… for a MIG device; it is
	// what CUDA_VISIBLE_DEVICES names.
	UUID string
	// Name is the model name ("NVIDIA H100 80GB HBM3"); for a MIG device,
	// its profile ("3g.40gb") when the source tells it.
	Name string
	// MIG is set on a MIG device; ParentUUID names its physical GPU and
	// MIGIndex its place among the parent's MIG devices.
	MIG        bool
	ParentUUID string
	MIGIndex   int
	// UtilPct is the share of time a kernel ran, 0..100, or Unknown.
	UtilPct int
	// MemUsedMiB and MemTotalMiB are framebuffer memory, or Unknown.
	MemUsedMiB  int64
	MemTotalMiB int64
	// PowerW is the board's draw in watts, rounded, or Unknown.
	PowerW int
	// TempC is the GPU core temperature in °C, or Unknown.
	TempC int
	// ProcessesKnown says whether Processes is the full list. When it is
	// false an empty list means "not reported", never "no process".
	ProcessesKnown bool
	Processes      []Process
}

// Process is one compute process on a GPU.
type Process struct {
	PID int
	// UsedMemMiB is the GPU memory the process holds, or Unknown.
	UsedMemMiB int64
	// SMUtilPct is the process's share of SM time, or Unknown.
	SMUtilPct int
}

// unknownReading returns a Reading whose numeric fields are all Unknown.
func unknownReading() Reading {
	return Reading{UtilPct: Unknown, MemUsedMiB: Unknown, MemTotalMiB: Unknown, PowerW: Unknown, TempC: Unknown}
}
