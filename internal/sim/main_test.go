package sim

import (
	"os"
	"testing"

	"github.com/gpufleet/gpufleet/internal/engine"
)

// TestMain runs every test of the package with the engine's live view
// checked against a fresh build at every step (engine.CheckViews): the
// replays here change the state the way a real one does.
func TestMain(m *testing.M) {
	engine.CheckViews(true)
	os.Exit(m.Run())
}
