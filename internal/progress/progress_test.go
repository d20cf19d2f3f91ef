package progress

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// screen is a fake terminal: it applies what a Display writes (\r, \n,
// cursor up, erase line) to a grid of lines, so that a test reads what
// the user would see.
type screen struct {
	lines  []string
	row    int
	writes int
}

var csi = regexp.MustCompile(`^\x1b\[(\d*)([A-Z])`)

func (s *screen) Write(p []byte) (int, error) {
	s.writes++
	for i := 0; i < len(p); {
		if m := csi.FindSubmatch(p[i:]); m != nil {
			n, _ := strconv.Atoi(string(m[1]))
			switch string(m[2]) {
			case "A":
				s.row -= n
			case "K":
				s.set("")
			}
			i += len(m[0])
			continue
		}
		switch c := p[i]; c {
		case '\r':
		case '\n':
			s.row++
		default:
			s.set(s.line() + string(c))
		}
		i++
	}
	return len(p), nil
}

func (s *screen) line() string {
	if s.row < len(s.lines) {
		return s.lines[s.row]
	}
	return ""
}

func (s *screen) set(v string) {
	for len(s.lines) <= s.row {
		s.lines = append(s.lines, "")
	}
	s.lines[s.row] = v
}

// clock is a manual clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestDisplay(t *testing.T) {
	scr := &screen{}
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := New(scr, clk.now)
	a := d.Task("gpufleet", 1_000_000)
	lp := d.Task("LP bound", 1000)
	if diff := cmp.Diff([]string{
		"gpufleet  [....................] 0/1,000,000   0%",
		"LP bound  [....................] 0/1,000   0%",
	}, scr.lines); diff != "" {
		t.Errorf("at the start (-want +got):\n%s", diff)
	}
	clk.advance(10 * time.Second)
	a.Set(250_000, 1_000_000)
	lp.Add(100) // not drawn: within Every of the last draw
	clk.advance(Every)
	lp.Add(0)
	if diff := cmp.Diff([]string{
		"gpufleet  [#####...............] 250,000/1,000,000  25%  24,510/s  31s left",
		"LP bound  [##..................] 100/1,000  10%  10/s  1m32s left",
	}, scr.lines); diff != "" {
		t.Errorf("after 10 s (-want +got):\n%s", diff)
	}
	clk.advance(2*time.Second - Every)
	lp.Done()
	d.Close()
	if diff := cmp.Diff([]string{
		"gpufleet  [#####...............] 250,000/1,000,000  25%  20,833/s  36s left",
		"LP bound  done: 1,000 in 12s (83/s)",
	}, scr.lines); diff != "" {
		t.Errorf("LP done (-want +got):\n%s", diff)
	}
	if scr.row != 2 {
		t.Errorf("cursor on row %d after Close, want 2 (below the lines)", scr.row)
	}
}

// TestDisplayThrottles: updates within Every of the last draw are not
// drawn; a finished task is, at once.
func TestDisplayThrottles(t *testing.T) {
	scr := &screen{}
	clk := &clock{t: time.Unix(0, 0)}
	d := New(scr, clk.now)
	task := d.Task("trace", 100)
	before := scr.writes
	for i := range 50 {
		clk.advance(time.Millisecond)
		task.Set(i, 100)
	}
	if got := scr.writes - before; got != 0 {
		t.Errorf("%d draws within %s, want 0", got, Every)
	}
	clk.advance(Every)
	task.Set(60, 100)
	task.Done()
	if got := scr.writes - before; got != 2 {
		t.Errorf("%d draws, want 2 (one past %s, one at done)", got, Every)
	}
}

// TestNilDisplay: progress off is a nil Display, and everything on it
// is a no-op.
func TestNilDisplay(t *testing.T) {
	var d *Display
	task := d.Task("x", 10)
	task.Set(1, 10)
	task.Add(1)
	task.Done()
	d.Close()
}

// TestConcurrent: tasks of one Display updated from several goroutines
// (policies simulated side by side); run with -race.
func TestConcurrent(t *testing.T) {
	scr := &screen{}
	var mu sync.Mutex
	clk := &clock{t: time.Unix(0, 0)}
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); clk.advance(Every); return clk.t }
	d := New(scr, now)
	var wg sync.WaitGroup
	for i := range 4 {
		task := d.Task("policy "+strconv.Itoa(i), 1000)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				task.Add(10)
			}
			task.Done()
		}()
	}
	wg.Wait()
	d.Close()
	for i, l := range scr.lines {
		if !strings.Contains(l, "done: 1,000 in") {
			t.Errorf("line %d: %q, want done", i, l)
		}
	}
}

// TestFor: progress is drawn on a terminal only, and never with quiet.
func TestFor(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if For(w, false) != nil {
		t.Error("a pipe got a display")
	}
	if For(file, false) != nil {
		t.Error("a file got a display")
	}
	if For(&screen{}, false) != nil {
		t.Error("a writer that is no file got a display")
	}
	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0) // a pseudo-terminal
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer tty.Close()
	if For(tty, false) == nil {
		t.Error("a terminal got no display")
	}
	if For(tty, true) != nil {
		t.Error("a terminal with quiet got a display")
	}
}
