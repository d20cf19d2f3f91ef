package kube

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/promtext"
)

// The dcgm-exporter metrics read per pod: utilization (GPU_UTIL, in
// percent; GR_ENGINE_ACTIVE, a ratio 0..1, where GPU_UTIL is not
// published, as on MIG instances) and framebuffer memory used (MiB).
const (
	MetricGPUUtil        = "DCGM_FI_DEV_GPU_UTIL"
	MetricGREngineActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
	MetricFBUsed         = "DCGM_FI_DEV_FB_USED"
)

// DefaultDCGMSelector selects the dcgm-exporter pods of NVIDIA's Helm
// chart and of the GPU Operator.
const DefaultDCGMSelector = "app.kubernetes.io/name=dcgm-exporter"

// maxDCGMScrape bounds what is read of one scrape: an exporter serving
// more is broken or not an exporter.
const maxDCGMScrape = 16 << 20

// DCGM is how Kubernetes mode reads the GPU telemetry of its pods: the
// dcgm-exporter pods (a DaemonSet on the GPU nodes) found through the
// apiserver by Selector, each scraped at http://POD_IP:Port/Path every
// Interval. The exporter labels each GPU's samples with the pod,
// namespace and container that hold it (its Kubernetes mode, on by
// default in NVIDIA's chart); those of gpufleet's running pods feed the
// engine's idle ladder.
type DCGM struct {
	// Selector picks the exporter pods (all namespaces); nil means
	// DefaultDCGMSelector.
	Selector labels.Selector
	// Port and Path are the exporter's (9400 and /metrics when zero).
	Port int
	Path string
	// Interval is the time between scrapes (default 15 s); Timeout
	// bounds one (default 5 s).
	Interval, Timeout time.Duration
	// Client does the requests; nil means a plain client with Timeout.
	// Tests give one whose transport dials their own server for a pod's
	// address (there is no GPU, nor a pod network, on the test cluster).
	Client *http.Client
}

func (d DCGM) withDefaults() DCGM {
	if d.Selector == nil {
		d.Selector, _ = labels.Parse(DefaultDCGMSelector)
	}
	if d.Port == 0 {
		d.Port = 9400
	}
	if d.Path == "" {
		d.Path = "/metrics"
	}
	if d.Interval <= 0 {
		d.Interval = 15 * time.Second
	}
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	if d.Client == nil {
		d.Client = &http.Client{Timeout: d.Timeout}
	}
	return d
}

// ParseDCGMSelector reads a label selector of exporter pods
// (--dcgm-selector), naming the flag, the value and what is allowed when
// it is not one.
func ParseDCGMSelector(field, s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil || sel.Empty() {
		return nil, &core.FieldError{Field: field, Value: s, Allowed: "a non-empty Kubernetes label selector, such as " + DefaultDCGMSelector}
	}
	return sel, nil
}

// PodGPU is what an exporter says of one GPU (or MIG instance) a pod
// holds, at one scrape.
type PodGPU struct {
	// Node is the exporter pod's node; GPU the exporter's gpu index,
	// UUID the GPU's, MIG the GPU_I_ID of a MIG instance ("" for a whole
	// GPU); Hostname the exporter's Hostname label.
	Node, UUID, MIG, Hostname string
	GPU                       int
	Namespace, Pod, Container string
	// UtilPct is 0..100 (-1: not published); MemUsedMiB -1 when not
	// published.
	UtilPct    int
	MemUsedMiB int64
	At         time.Time
}

// Key is the pod as namespace/name.
func (g PodGPU) Key() string { return g.Namespace + "/" + g.Pod }

// ParseDCGMPods reads one dcgm-exporter scrape of node: the GPUs the
// exporter attributes to a pod (labels pod and namespace, and container),
// with their utilization and memory. A GPU attributed to no pod (empty
// pod label, or none: the exporter's Kubernetes mode off) is left out, as
// are metrics it does not read. Errors are *core.ParseError with src,
// the line, the metric or label and the value.
func ParseDCGMPods(src, node string, body []byte, at time.Time) ([]PodGPU, error) {
	samples, err := promtext.Parse(src, body)
	if err != nil {
		return nil, err
	}
	type key struct{ gpu, mig string }
	type acc struct {
		g                    PodGPU
		engine, util, hasMem bool
	}
	by := map[key]*acc{}
	var order []key
	for _, s := range samples {
		if s.Name != MetricGPUUtil && s.Name != MetricGREngineActive && s.Name != MetricFBUsed {
			continue
		}
		pod, _ := s.Label("pod")
		ns, _ := s.Label("namespace")
		if pod == "" {
			continue
		}
		bad := func(field, value, allowed string) error {
			return &core.ParseError{File: src, Line: s.Line, Field: field, Value: value, Allowed: allowed}
		}
		if ns == "" {
			return nil, bad(s.Name+" label namespace", "", "the namespace of pod "+pod)
		}
		gl, _ := s.Label("gpu")
		idx, err := strconv.Atoi(gl)
		if err != nil || idx < 0 {
			return nil, bad(s.Name+" label gpu", gl, "the GPU's index, an integer ≥ 0")
		}
		mig, _ := s.Label("GPU_I_ID")
		k := key{gl, mig}
		a := by[k]
		if a == nil {
			uuid, _ := s.Label("UUID")
			host, _ := s.Label("Hostname")
			ctr, _ := s.Label("container")
			a = &acc{g: PodGPU{Node: node, GPU: idx, UUID: uuid, MIG: mig, Hostname: host, Namespace: ns, Pod: pod, Container: ctr, UtilPct: -1, MemUsedMiB: -1, At: at}}
			by[k] = a
			order = append(order, k)
		} else if a.g.Namespace != ns || a.g.Pod != pod {
			return nil, bad(s.Name+" label pod", ns+"/"+pod, fmt.Sprintf("GPU %s's pod on its other samples, %s", gl, a.g.Key()))
		}
		v := s.Value
		switch s.Name {
		case MetricGPUUtil:
			if math.IsNaN(v) || v < 0 || v > 100 {
				return nil, bad(s.Name, strconv.FormatFloat(v, 'g', -1, 64), "a percentage, 0..100")
			}
			a.g.UtilPct, a.util = int(math.Round(v)), true
		case MetricGREngineActive:
			if math.IsNaN(v) || v < 0 || v > 1 {
				return nil, bad(s.Name, strconv.FormatFloat(v, 'g', -1, 64), "a ratio, 0..1")
			}
			if !a.util { // GPU_UTIL, where published, wins
				a.g.UtilPct, a.engine = int(math.Round(v*100)), true
			}
		case MetricFBUsed:
			if math.IsNaN(v) || v < 0 || v > math.MaxInt32 {
				return nil, bad(s.Name, strconv.FormatFloat(v, 'g', -1, 64), "MiB, ≥ 0")
			}
			a.g.MemUsedMiB, a.hasMem = int64(math.Round(v)), true
		}
	}
	out := make([]PodGPU, 0, len(order))
	for _, k := range order {
		out = append(out, by[k].g)
	}
	slices.SortStableFunc(out, func(a, b PodGPU) int {
		if a.GPU != b.GPU {
			return a.GPU - b.GPU
		}
		return strings.Compare(a.MIG, b.MIG)
	})
	return out, nil
}

// scrapeDCGM fetches and parses one exporter pod.
func scrapeDCGM(ctx context.Context, d DCGM, p *corev1.Pod, at time.Time) ([]PodGPU, error) {
	url := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(d.Port)) + d.Path
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := d.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDCGMScrape+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if len(body) > maxDCGMScrape {
		return nil, fmt.Errorf("%s: scrape larger than %d bytes", url, maxDCGMScrape)
	}
	return ParseDCGMPods(url, p.Spec.NodeName, body, at)
}

// exporters are the exporter pods to scrape: selected, running, with an
// address and a node.
func exporters(pods []*corev1.Pod, sel labels.Selector) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out
}

// scrapeAll scrapes the exporters at once and returns what each said,
// by exporter pod (namespace/name), and each one's error.
func scrapeAll(ctx context.Context, d DCGM, pods []*corev1.Pod, at time.Time) (map[string][]PodGPU, map[string]error) {
	got := make([][]PodGPU, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, p := range pods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			got[i], errs[i] = scrapeDCGM(ctx, d, p, at)
		})
	}
	wg.Wait()
	ok, failed := map[string][]PodGPU{}, map[string]error{}
	for i, p := range pods {
		k := p.Namespace + "/" + p.Name
		if errs[i] != nil {
			failed[k] = errs[i]
			continue
		}
		ok[k] = got[i]
	}
	return ok, failed
}
