package gpu

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/promtext"
)

// The DCGM exporter metrics DCGM reads. Memory is in MiB, power in W,
// temperature in °C, utilization in percent; GR_ENGINE_ACTIVE is a ratio
// 0..1, published for MIG instances where GPU_UTIL is not.
const (
	MetricGPUUtil        = "DCGM_FI_DEV_GPU_UTIL"
	MetricFBUsed         = "DCGM_FI_DEV_FB_USED"
	MetricFBFree         = "DCGM_FI_DEV_FB_FREE"
	MetricFBReserved     = "DCGM_FI_DEV_FB_RESERVED"
	MetricPowerUsage     = "DCGM_FI_DEV_POWER_USAGE"
	MetricGPUTemp        = "DCGM_FI_DEV_GPU_TEMP"
	MetricGREngineActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
)

// maxScrape bounds what DCGM reads of a scrape: an exporter serving more
// is broken or not an exporter.
const maxScrape = 16 << 20

// DCGM reads GPUs from a DCGM exporter's /metrics endpoint (Prometheus
// text). The exporter does not list processes, so its readings have
// ProcessesKnown false: the zombie rule needs NVML or nvidia-smi.
type DCGM struct {
	// URL is the endpoint, e.g. http://localhost:9400/metrics.
	URL string
	// Client does the request; nil means a client with a 10 s timeout.
	Client *http.Client
}

var _ Source = (*DCGM)(nil)

// Name returns "dcgm".
func (*DCGM) Name() string { return "dcgm" }

// Close does nothing: each sample is one request.
func (*DCGM) Close() error { return nil }

// Sample fetches the endpoint once and parses it.
func (d *DCGM) Sample(ctx context.Context) ([]Reading, error) {
	client := d.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("dcgm: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("dcgm: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("dcgm: get %s: %s", d.URL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxScrape+1))
	if err != nil {
		return nil, fmt.Errorf("dcgm: read %s: %w", d.URL, err)
	}
	if len(body) > maxScrape {
		return nil, fmt.Errorf("dcgm: %s: scrape larger than %d bytes", d.URL, maxScrape)
	}
	rs, err := ParseDCGM(d.URL, body)
	if err != nil {
		return nil, fmt.Errorf("dcgm: %w", err)
	}
	return rs, nil
}

// ParseDCGM turns a DCGM exporter scrape into readings, one per GPU (label
// gpu) and one per MIG instance (labels gpu and GPU_I_ID), ordered by
// index with each GPU before its instances. Metrics it does not use are
// ignored; a GPU without a metric has that value Unknown. For a MIG
// instance the exporter's UUID label is its parent's, so the reading's
// UUID is empty and ParentUUID holds it; its Name is the profile
// (GPU_I_PROFILE).
func ParseDCGM(src string, body []byte) ([]Reading, error) {
	samples, err := promtext.Parse(src, body)
	if err != nil {
		return nil, err
	}
	type key struct {
		gpu int
		gi  int // -1 for the physical GPU
	}
	type acc struct {
		r               Reading
		used, free, res float64
		hasUsed         bool
		hasFree         bool
		engine          float64
		hasEngine       bool
	}
	byKey := map[key]*acc{}
	for _, s := range samples {
		switch s.Name {
		case MetricGPUUtil, MetricFBUsed, MetricFBFree, MetricFBReserved, MetricPowerUsage, MetricGPUTemp, MetricGREngineActive:
		default:
			continue
		}
		bad := func(field, value, allowed string) error {
			return &core.ParseError{File: src, Line: s.Line, Field: field, Value: value, Allowed: allowed}
		}
		gpuLabel, ok := s.Label("gpu")
		if !ok {
			return nil, bad(s.Name+" label gpu", "", "a gpu label on every DCGM_FI_ metric")
		}
		idx, err := strconv.Atoi(gpuLabel)
		if err != nil || idx < 0 {
			return nil, bad(s.Name+" label gpu", gpuLabel, "a GPU index >= 0")
		}
		k := key{gpu: idx, gi: -1}
		if gi, ok := s.Label("GPU_I_ID"); ok && gi != "" {
			n, err := strconv.Atoi(gi)
			if err != nil || n < 0 {
				return nil, bad(s.Name+" label GPU_I_ID", gi, "a GPU instance id >= 0")
			}
			k.gi = n
		}
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) || s.Value < 0 {
			// The exporter writes what DCGM returns; a blank field comes
			// out as a huge sentinel or NaN. Not a reading.
			return nil, bad(s.Name, strconv.FormatFloat(s.Value, 'g', -1, 64), "a finite value >= 0")
		}
		a := byKey[k]
		if a == nil {
			a = &acc{r: unknownReading()}
			a.r.Index = idx
			uuid, _ := s.Label("UUID")
			model, _ := s.Label("modelName")
			if k.gi >= 0 {
				a.r.MIG, a.r.MIGIndex, a.r.ParentUUID = true, k.gi, uuid
				a.r.Name, _ = s.Label("GPU_I_PROFILE")
			} else {
				a.r.UUID, a.r.Name = uuid, model
			}
			byKey[k] = a
		}
		v := s.Value
		switch s.Name {
		case MetricGPUUtil:
			if v > 100 {
				return nil, bad(s.Name, strconv.FormatFloat(v, 'g', -1, 64), "a percentage 0..100")
			}
			a.r.UtilPct = int(math.Round(v))
		case MetricGREngineActive:
			if v > 1 {
				return nil, bad(s.Name, strconv.FormatFloat(v, 'g', -1, 64), "a ratio 0..1")
			}
			a.engine, a.hasEngine = v, true
		case MetricFBUsed:
			a.used, a.hasUsed = v, true
		case MetricFBFree:
			a.free, a.hasFree = v, true
		case MetricFBReserved:
			a.res = v
		case MetricPowerUsage:
			if v > 100000 {
				return nil, bad(s.Name, strconv.FormatFloat(v, 'g', -1, 64), "watts 0..100000")
			}
			a.r.PowerW = int(math.Round(v))
		case MetricGPUTemp:
			if v > 1000 {
				return nil, bad(s.Name, strconv.FormatFloat(v, 'g', -1, 64), "°C 0..1000")
			}
			a.r.TempC = int(math.Round(v))
		}
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].gpu != keys[j].gpu {
			return keys[i].gpu < keys[j].gpu
		}
		return keys[i].gi < keys[j].gi
	})
	out := make([]Reading, 0, len(keys))
	for _, k := range keys {
		a := byKey[k]
		const maxMiB = 1 << 40
		if a.hasUsed && a.used <= maxMiB {
			a.r.MemUsedMiB = int64(math.Round(a.used))
		}
		if a.hasUsed && a.hasFree && a.used+a.free+a.res <= maxMiB {
			a.r.MemTotalMiB = int64(math.Round(a.used + a.free + a.res))
		}
		if a.r.UtilPct == Unknown && a.hasEngine {
			a.r.UtilPct = int(math.Round(a.engine * 100))
		}
		out = append(out, a.r)
	}
	return out, nil
}
