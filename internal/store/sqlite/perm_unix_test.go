//go:build unix

package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFilesOwnerOnly: the database and its -wal and -shm files are 0600
// whatever the umask allows, and Open takes group and other bits away
// from an existing file, saying so.
func TestFilesOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask: SQLite alone makes 0644
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "g.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Teams().CreateTeam(t.Context(), teamFor("ml")); err != nil { // the WAL and SHM exist from the first write
		t.Fatal(err)
	}
	if got := s.Tightened(); len(got) != 0 {
		t.Errorf("a new database reports tightened files %v", got)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", filepath.Base(p), m)
		}
	}
	s.Close()

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Tightened(); len(got) != 1 || !strings.Contains(got[0], "was 0644") {
		t.Errorf("Tightened() = %v, want the database file, was 0644", got)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("reopened: %v %v, want 0600", st.Mode(), err)
	}
}
