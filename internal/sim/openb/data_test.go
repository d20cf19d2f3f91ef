package openb

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gpufleet/gpufleet/internal/trace"
)

// openbDir is the shared copy of the openb trace, relative to this
// package's directory (go test runs in it).
const openbDir = "../../../../shared/data/alibaba-openb-gpu-sharing"

var (
	scenarioOnce sync.Once
	scenario     *Scenario
	scenarioErr  error
)

// defaultScenario is the artifact's setup: the GPU nodes and the default
// pod list. It skips the test when the trace is not there.
func defaultScenario(tb testing.TB) *Scenario {
	tb.Helper()
	if _, err := os.Stat(openbDir); err != nil {
		tb.Skipf("openb trace not available: %v", err)
	}
	scenarioOnce.Do(func() {
		nodes, err := trace.LoadOpenbNodes(filepath.Join(openbDir, "openb_node_list_gpu_node.csv"))
		if err != nil {
			scenarioErr = err
			return
		}
		pods, err := trace.LoadOpenbPods(filepath.Join(openbDir, "openb_pod_list_default.csv"))
		if err != nil {
			scenarioErr = err
			return
		}
		scenario, scenarioErr = NewScenario(nodes, pods, 0)
	})
	if scenarioErr != nil {
		tb.Fatal(scenarioErr)
	}
	return scenario
}
