package progress

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Every is how often a Display redraws at most (a finished task or Close
// redraws at once): often enough to look alive, rarely enough that
// drawing never costs the work measurable time.
const Every = 200 * time.Millisecond

// IsTerminal reports whether w is a character device: stderr left on the
// user's terminal, not redirected to a file or a pipe. (/dev/null is a
// character device too; what is drawn there is lost, which is harmless.)
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// For returns a Display on w when w is a terminal and quiet is false,
// else nil (which draws nothing).
func For(w io.Writer, quiet bool) *Display {
	if quiet || !IsTerminal(w) {
		return nil
	}
	return New(w, time.Now)
}

// Display draws its tasks, one line each, on a terminal. Its methods may
// be called from several goroutines. A nil *Display is valid and draws
// nothing, so callers need not test whether progress is shown.
type Display struct {
	mu    sync.Mutex
	w     io.Writer
	now   func() time.Time
	tasks []*Task
	drawn int // lines on the screen from the last draw
	last  time.Time
}

// New returns a Display that writes to w and reads the time from now.
func New(w io.Writer, now func() time.Time) *Display {
	return &Display{w: w, now: now}
}

// Task adds a line for work of total steps, started now. On a nil
// Display it returns nil, whose methods do nothing.
func (d *Display) Task(name string, total int) *Task {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t := &Task{d: d, name: name, total: total, start: d.now()}
	d.tasks = append(d.tasks, t)
	d.draw(true)
	return t
}

// Close draws the tasks a last time and leaves the cursor below them.
func (d *Display) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draw(true)
}

// Task is one line of a Display.
type Task struct {
	d           *Display
	name        string
	total, done int
	start, end  time.Time
}

// Set records that done of total steps are done (total may grow, for
// work that learns its size as it goes). It has the shape of the
// progress callbacks of the packages that do long work.
func (t *Task) Set(done, total int) {
	if t == nil {
		return
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	t.done, t.total = done, total
	t.d.draw(false)
}

// Add records n more steps done.
func (t *Task) Add(n int) {
	if t == nil {
		return
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	t.done += n
	t.d.draw(false)
}

// Done marks the task finished: its line then says how long it took.
func (t *Task) Done() {
	if t == nil {
		return
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	if t.end.IsZero() {
		t.end = t.d.now()
		t.done = max(t.done, t.total)
	}
	t.d.draw(true)
}

// draw redraws every line, at most once per Every unless now. The caller
// holds d.mu.
func (d *Display) draw(now bool) {
	at := d.now()
	if !now && at.Sub(d.last) < Every {
		return
	}
	d.last = at
	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", d.drawn) // back to the first line
	}
	width := 0
	for _, t := range d.tasks {
		width = max(width, len(t.name))
	}
	for _, t := range d.tasks {
		b.WriteString("\r\x1b[2K")
		b.WriteString(t.line(at, width))
		b.WriteByte('\n')
	}
	d.drawn = len(d.tasks)
	_, _ = io.WriteString(d.w, b.String()) // best effort: a lost line is no error
}

// line is the task's text at now, its name padded to width.
func (t *Task) line(now time.Time, width int) string {
	name := t.name + strings.Repeat(" ", width-len(t.name))
	if !t.end.IsZero() {
		took := t.end.Sub(t.start)
		if took <= 0 {
			return fmt.Sprintf("%s  done: %s", name, count(t.done))
		}
		return fmt.Sprintf("%s  done: %s in %s (%s)", name, count(t.done), round(took), perSecond(t.done, took))
	}
	pct := 0
	if t.total > 0 {
		pct = int(int64(t.done) * 100 / int64(t.total))
	}
	s := fmt.Sprintf("%s  %s %s/%s %3d%%", name, bar(t.done, t.total, 20), count(t.done), count(t.total), pct)
	el := now.Sub(t.start)
	if t.done <= 0 || el <= 0 {
		return s
	}
	left := time.Duration(float64(el) * float64(t.total-t.done) / float64(t.done))
	return s + "  " + perSecond(t.done, el) + "  " + round(left) + " left"
}

// perSecond is done per second over took, rounded.
func perSecond(done int, took time.Duration) string {
	return count(int(float64(done)/took.Seconds()+0.5)) + "/s"
}

func bar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = min(int(int64(done)*int64(width)/int64(total)), width)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// count writes n with thousands separated: 1,000,000.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// round shortens d for a human: whole seconds from 10 s, tenths below.
func round(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
