package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
)

func testJobLogs(t *testing.T, open Opener) {
	s := open(t)
	c := ctx(t)
	setupTeams(t, s, "ml")
	submit(t, s, job("j1", "ml"))
	submit(t, s, job("j2", "ml"))
	logs := s.JobLogs()

	// An empty log of a known job; an unknown job is not found.
	r, err := logs.ReadLog(c, "j1", 0, 0)
	ok(t, err, "read empty")
	if len(r.Data) != 0 || r.End != 0 || r.Start != 0 {
		t.Errorf("empty log = %+v", r)
	}
	_, err = logs.ReadLog(c, "nope", 0, 0)
	wantErr(t, err, store.ErrNotFound, "read unknown job")
	_, err = logs.AppendLog(c, "nope", "a", 0, []byte("x"), at(1))
	wantErr(t, err, store.ErrNotFound, "append to unknown job")

	// Stream a: two chunks, then the second resent (a lost reply) and an
	// overlapping one: only new bytes are added.
	end, err := logs.AppendLog(c, "j1", "a", 0, []byte("hello "), at(1))
	ok(t, err, "append 1")
	if end != 6 {
		t.Errorf("end after append 1 = %d", end)
	}
	_, err = logs.AppendLog(c, "j1", "a", 6, []byte("world\n"), at(2))
	ok(t, err, "append 2")
	end, err = logs.AppendLog(c, "j1", "a", 6, []byte("world\n"), at(2))
	ok(t, err, "resend 2")
	if end != 12 {
		t.Errorf("end after resend = %d, want 12", end)
	}
	end, err = logs.AppendLog(c, "j1", "a", 8, []byte("rld\nagain\n"), at(3))
	ok(t, err, "overlap")
	if end != 18 {
		t.Errorf("end after overlap = %d, want 18", end)
	}
	// A gap is refused and says where to resend from.
	_, err = logs.AppendLog(c, "j1", "a", 30, []byte("x"), at(3))
	wantErr(t, err, store.ErrConflict, "gap")
	if n, _ := logs.LogStreamEnd(c, "j1", "a"); n != 18 {
		t.Errorf("stream end = %d, want 18", n)
	}

	// Stream b of the same job (the run resumed elsewhere) goes after it.
	_, err = logs.AppendLog(c, "j1", "b", 0, []byte("resumed\n"), at(4))
	ok(t, err, "stream b")
	// Another job's log is its own.
	_, err = logs.AppendLog(c, "j2", "a", 0, []byte("other\n"), at(4))
	ok(t, err, "j2")

	whole := "hello world\nagain\nresumed\n"
	r, err = logs.ReadLog(c, "j1", 0, 0)
	ok(t, err, "read all")
	if string(r.Data) != whole || r.Start != 0 || r.End != int64(len(whole)) {
		t.Errorf("read all = %q start %d end %d", r.Data, r.Start, r.End)
	}
	// Offsets fall inside chunks; limits cut across them.
	r, err = logs.ReadLog(c, "j1", 3, 10)
	ok(t, err, "read from 3")
	if string(r.Data) != whole[3:13] || r.Start != 3 {
		t.Errorf("read 3+10 = %q start %d, want %q", r.Data, r.Start, whole[3:13])
	}
	r, err = logs.TailLog(c, "j1", 8)
	ok(t, err, "tail")
	if string(r.Data) != "resumed\n" || r.Start != int64(len(whole)-8) {
		t.Errorf("tail 8 = %q start %d", r.Data, r.Start)
	}
	r, err = logs.TailLog(c, "j1", 1000)
	ok(t, err, "tail more than there is")
	if string(r.Data) != whole {
		t.Errorf("tail 1000 = %q", r.Data)
	}
	r, err = logs.ReadLog(c, "j1", 1000, 0)
	ok(t, err, "read past end")
	if len(r.Data) != 0 || r.End != int64(len(whole)) {
		t.Errorf("read past end = %+v", r)
	}

	// Retention drops old chunks; the rest keeps its offsets and the log
	// goes on growing from its end.
	n, err := logs.DeleteLogsBefore(c, at(3))
	ok(t, err, "retention")
	if n != 2 {
		t.Errorf("retention removed %d chunks, want 2", n)
	}
	r, err = logs.ReadLog(c, "j1", 0, 0)
	ok(t, err, "read after retention")
	if string(r.Data) != whole[12:] || r.Start != 12 {
		t.Errorf("after retention = %q start %d, want %q from 12", r.Data, r.Start, whole[12:])
	}
	end, err = logs.AppendLog(c, "j1", "b", 8, []byte("more\n"), at(5))
	ok(t, err, "append after retention")
	if end != 13 {
		t.Errorf("stream b end = %d", end)
	}
	r, _ = logs.ReadLog(c, "j1", int64(len(whole)), 0)
	if string(r.Data) != "more\n" || r.Start != int64(len(whole)) {
		t.Errorf("new chunk at %d = %q", r.Start, r.Data)
	}

	// Bad input names the field.
	_, err = logs.ReadLog(c, "j1", -1, 0)
	wantField(t, err, "offset", "-1", "negative offset")
	_, err = logs.TailLog(c, "j1", 0)
	wantField(t, err, "tail", "0", "zero tail")
	_, err = logs.AppendLog(c, "j1", "", 0, []byte("x"), at(1))
	wantField(t, err, "stream", "", "empty stream")
	_, err = logs.AppendLog(c, "j1", "a", 18, make([]byte, store.MaxLogChunk+1), at(1))
	wantField(t, err, "data", "-", "chunk too big")

	// Concurrent uploads of different streams of one job never share an
	// offset, and each stream's bytes stay in order.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("w%d", w)
			var off int64
			for i := 0; i < 10; i++ {
				line := []byte(fmt.Sprintf("%s:%d\n", stream, i))
				if _, err := logs.AppendLog(c, "j2", stream, off, line, at(6)); err != nil {
					errs <- err
					return
				}
				off += int64(len(line))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent append: %v", err)
	}
	r, err = logs.ReadLog(c, "j2", 0, 0)
	ok(t, err, "read j2")
	if got := bytes.Count(r.Data, []byte("\n")); got != 41 {
		t.Errorf("j2 has %d lines, want 41:\n%s", got, r.Data)
	}
	for w := 0; w < 4; w++ {
		last := -1
		for _, l := range bytes.Split(r.Data, []byte("\n")) {
			var i int
			if _, err := fmt.Sscanf(string(l), fmt.Sprintf("w%d:%%d", w), &i); err == nil {
				if i != last+1 {
					t.Errorf("stream w%d: line %d after %d", w, i, last)
				}
				last = i
			}
		}
		if last != 9 {
			t.Errorf("stream w%d ends at line %d", w, last)
		}
	}
}
