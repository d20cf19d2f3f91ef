package gpu

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/clock"
	"github.com/gpufleet/gpufleet/internal/core"
)

// ProbeTimeout bounds auto's first sample of each source: nvidia-smi can
// hang for minutes on a GPU in a bad state.
const ProbeTimeout = 15 * time.Second

// Names lists the values Open accepts, as a --gpu-source flag would.
var Names = []string{"auto", "nvml", "nvidia-smi", "dcgm", "fake"}

// Options configure the sources Open can make.
type Options struct {
	// SMIPath is nvidia-smi's path; empty looks "nvidia-smi" up on PATH.
	SMIPath string
	// LookPath finds nvidia-smi; nil means exec.LookPath.
	LookPath func(file string) (string, error)
	// Run runs nvidia-smi; nil means ExecCommand.
	Run Command
	// DCGMURL is a DCGM exporter's metrics URL; auto tries it last.
	DCGMURL string
	// HTTPClient fetches DCGMURL; nil means a 10 s timeout client.
	HTTPClient *http.Client
	// FakeBoard sizes the fake (NewMachine: DefaultBoard's value for
	// each zero field), and FakeLoads drives it: the load on each GPU.
	FakeBoard Board
	FakeLoads func() map[int]Load
	// FakeSteps, when set, makes the fake a script played on Clock (nil:
	// the wall clock) instead of a Machine.
	Clock     clock.Clock
	FakeSteps []Step

	// openNVML replaces NewNVML in tests.
	openNVML func() (Source, error)
}

func (o Options) nvml() (Source, error) {
	if o.openNVML != nil {
		return o.openNVML()
	}
	n, err := NewNVML()
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (o Options) smi() (Source, error) {
	look := o.LookPath
	if look == nil {
		look = exec.LookPath
	}
	file := o.SMIPath
	if file == "" {
		file = "nvidia-smi"
	}
	path, err := look(file)
	if err != nil {
		return nil, unavailable("nvidia-smi unavailable: %v", err)
	}
	return &SMI{Path: path, Run: o.Run}, nil
}

func (o Options) dcgm() (Source, error) {
	if o.DCGMURL == "" {
		return nil, unavailable("dcgm unavailable: no exporter URL given")
	}
	return &DCGM{URL: o.DCGMURL, Client: o.HTTPClient}, nil
}

func (o Options) fake() Source {
	if o.FakeSteps == nil {
		return NewMachine(o.FakeBoard, o.FakeLoads)
	}
	c := o.Clock
	if c == nil {
		c = clock.Real{}
	}
	return NewFake(c, o.FakeSteps...)
}

// Open returns the source called name (one of Names). "auto" tries NVML,
// then nvidia-smi if it is on PATH, then the DCGM exporter if a URL is
// given, and keeps the first that reads the GPUs once without error; when
// none does, its error says why for each. The caller closes the source.
func Open(ctx context.Context, name string, o Options) (Source, error) {
	switch name {
	case "nvml":
		return o.nvml()
	case "nvidia-smi":
		return o.smi()
	case "dcgm":
		return o.dcgm()
	case "fake":
		return o.fake(), nil
	case "auto", "":
		return auto(ctx, o)
	}
	return nil, &core.FieldError{Field: "gpu-source", Value: name, Allowed: "one of " + strings.Join(Names, ", ")}
}

func auto(ctx context.Context, o Options) (Source, error) {
	var why []string
	for _, try := range []func() (Source, error){o.nvml, o.smi, o.dcgm} {
		src, err := try()
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		probe, cancel := context.WithTimeout(ctx, ProbeTimeout)
		_, err = src.Sample(probe)
		cancel()
		if err != nil {
			why = append(why, fmt.Sprintf("%s: first sample: %v", src.Name(), err))
			src.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("gpu: auto: %w", ctx.Err())
			}
			continue
		}
		return src, nil
	}
	return nil, unavailable("gpu: auto: no source works: %s", strings.Join(why, "; "))
}
