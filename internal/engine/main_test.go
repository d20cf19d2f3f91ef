package engine

import (
	"os"
	"testing"
)

// TestMain runs every test of the package with the live view checked
// against a fresh build at every Step (CheckViews).
func TestMain(m *testing.M) {
	CheckViews(true)
	os.Exit(m.Run())
}
