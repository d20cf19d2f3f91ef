package spool

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
)

var t0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// crash abandons s as a killed agent would: its files are closed with
// nothing synced, no state written. It returns the active segment's path
// and how much of it is known to be on disk, for a test to cut what a
// power loss could lose.
func (s *Spool) crash() (active string, synced, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active != nil {
		g := s.segs[len(s.segs)-1]
		active, synced, size = g.path, g.synced, g.size
		s.active.Close()
		s.active = nil
	}
	s.closed = true
	return active, synced, size
}

func sample(i int) link.Sample {
	return link.Sample{LeaseID: "L1", GPU: i % 2, UUID: fmt.Sprintf("GPU-%d", i%2), At: t0.Add(time.Duration(i) * time.Second), UtilPct: i % 101, MemUsedMiB: int64(100 * i), MemTotalMiB: 81920, PowerW: 300, TempC: 50, Processes: 1}
}

func mustOpen(t *testing.T, dir string, o Options) *Spool {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func seqsOf(recs []link.Record) []uint64 {
	var out []uint64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func TestAppendPeekAckReopen(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentRecords: 4, MaxRecords: 100}
	s := mustOpen(t, dir, o)
	for i := 1; i <= 10; i++ {
		if seq, err := s.AppendSample(sample(i)); err != nil || seq != uint64(i) {
			t.Fatalf("append %d: seq %d, %v", i, seq, err)
		}
	}
	if seq, err := s.AppendEvent(core.Event{At: t0, Kind: "job-exited", Subject: "j1", Attrs: map[string]string{"exit_code": "0"}}); err != nil || seq != 11 {
		t.Fatalf("event: %d, %v", seq, err)
	}
	want := []string{"seg-00000000000000000001.log", "seg-00000000000000000005.log", "seg-00000000000000000009.log"}
	if d := cmp.Diff(want, segFiles(t, dir)); d != "" {
		t.Errorf("segments (-want +got)\n%s", d)
	}
	recs, err := s.Peek(5)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]uint64{1, 2, 3, 4, 5}, seqsOf(recs)); d != "" {
		t.Errorf("peek (-want +got)\n%s", d)
	}
	if d := cmp.Diff(sample(3), *recs[2].Sample); d != "" {
		t.Errorf("record 3 (-want +got)\n%s", d)
	}
	if err := s.Ack(5); err != nil {
		t.Fatal(err)
	}
	if got := segFiles(t, dir); len(got) != 2 {
		t.Errorf("after ack 5: segments %v, want the first one gone", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = mustOpen(t, dir, o)
	if s.Len() != 6 {
		t.Errorf("after reopen: len %d, want 6", s.Len())
	}
	recs, _ = s.Peek(100)
	if d := cmp.Diff([]uint64{6, 7, 8, 9, 10, 11}, seqsOf(recs)); d != "" {
		t.Errorf("peek after reopen (-want +got)\n%s", d)
	}
	if recs[5].Kind != link.KindEvent || recs[5].Event.Attrs["exit_code"] != "0" {
		t.Errorf("record 11 = %+v, want the event", recs[5])
	}
	if seq, _ := s.AppendSample(sample(12)); seq != 12 {
		t.Errorf("numbering after reopen: %d, want 12", seq)
	}
	if err := s.Ack(12); err != nil {
		t.Fatal(err)
	}
	if got := segFiles(t, dir); len(got) != 0 {
		t.Errorf("all acknowledged: segments %v, want none", got)
	}
	if err := s.Ack(13); err == nil {
		t.Error("ack beyond the last record succeeded")
	}
	s.Close()
	// Numbering survives an empty spool: the state file remembers it.
	s = mustOpen(t, dir, o)
	if seq, _ := s.AppendSample(sample(13)); seq != 13 {
		t.Errorf("numbering after an empty reopen: %d, want 13", seq)
	}
	s.Close()
	if _, err := s.AppendSample(sample(14)); err != ErrClosed {
		t.Errorf("append after close: %v, want ErrClosed", err)
	}
}

func TestPeekedNumbersAreNeverReused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, Options{SegmentRecords: 8, MaxRecords: 16})
	for i := 1; i <= 3; i++ {
		s.AppendSample(sample(i))
	}
	s.Peek(3)
	path, synced, size := s.crash()
	if synced != size {
		t.Fatalf("Peek left %d of %d bytes unsynced", size-synced, size)
	}
	// Even if the segment were lost whole, numbers handed to the server
	// are not given to other records.
	os.Remove(path)
	s = mustOpen(t, dir, Options{SegmentRecords: 8, MaxRecords: 16})
	if seq, _ := s.AppendSample(sample(4)); seq != 4 {
		t.Errorf("seq = %d, want 4", seq)
	}
}

func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentRecords: 100, MaxRecords: 1000}
	s := mustOpen(t, dir, o)
	for i := 1; i <= 5; i++ {
		s.AppendSample(sample(i))
	}
	path, _, size := s.crash()
	// Half of the last line reached the disk, then garbage.
	data, _ := os.ReadFile(path)
	lastNL := strings.LastIndexByte(string(data[:size-1]), '\n')
	os.WriteFile(path, append(data[:lastNL+1+20], []byte("\x00\x00garbage")...), 0o640)
	s = mustOpen(t, dir, o)
	recs, _ := s.Peek(10)
	if d := cmp.Diff([]uint64{1, 2, 3, 4}, seqsOf(recs)); d != "" {
		t.Errorf("after a torn tail (-want +got)\n%s", d)
	}
	if st := s.Stats(); st.Truncated != 1 || st.NextSeq != 5 {
		t.Errorf("stats = %+v, want one truncation and next seq 5", st)
	}
	// A corrupt record in the middle cuts everything after it: what is
	// kept is always a prefix.
	s.AppendSample(sample(5))
	s.AppendSample(sample(6))
	s.Close()
	files := segFiles(t, dir)
	first := filepath.Join(dir, files[0])
	data, _ = os.ReadFile(first)
	data[len(data)/2] ^= 0x20
	os.WriteFile(first, data, 0o640)
	s = mustOpen(t, dir, o)
	recs, _ = s.Peek(10)
	got := seqsOf(recs)
	for i, seq := range got {
		if seq != uint64(i+1) && !(i >= 2 && seq >= 5) {
			t.Errorf("after corruption: %v is not a prefix of each segment", got)
		}
	}
}

func TestBadState(t *testing.T) {
	for _, body := range []string{"nonsense\n", "gpufleet-spool 1\nacked x\nsent 1\n", "gpufleet-spool 1\n"} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "state"), []byte(body), 0o640)
		if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "state") {
			t.Errorf("state %q: err = %v, want an error naming the state file", body, err)
		}
	}
	if _, err := Open(t.TempDir(), Options{SegmentRecords: 10, MaxRecords: 15}); err == nil || !strings.Contains(err.Error(), "max_records") {
		t.Errorf("max < 2 segments: err = %v", err)
	}
}

func TestCompactionSummarises(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentRecords: 4, MaxRecords: 8}
	s := mustOpen(t, dir, o)
	// GPU 0 idles at 0-10%, GPU 1 works; an exit status in the middle.
	utils := []int{0, 90, 10, 95, 5, link.Unknown, 0, 99}
	for i, u := range utils {
		x := link.Sample{LeaseID: "L1", GPU: i % 2, UUID: fmt.Sprintf("GPU-%d", i%2), At: t0.Add(time.Duration(i) * time.Minute), UtilPct: u, MemUsedMiB: int64(1000 * (i % 2 * 40)), Processes: 1}
		s.AppendSample(x)
		if i == 3 {
			s.AppendEvent(core.Event{At: t0, Kind: "job-exited", Subject: "j1"})
		}
	}
	for i := 9; i <= 12; i++ {
		s.AppendSample(sample(i))
	}
	// 13 records appended, bound 8: the oldest sealed segments were
	// summarised down to at most 8 - 4.
	recs, err := s.Peek(100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, fmt.Sprintf("%d %s", r.Seq, r.Kind))
	}
	want := []string{"5 event", "8 summary", "9 sample", "10 sample", "11 sample", "12 sample", "13 sample"}
	if d := cmp.Diff(want, kinds); d != "" {
		t.Fatalf("records (-want +got)\n%s", d)
	}
	sum := recs[1].Summary
	wantSum := &link.Summary{FromSeq: 1, ToSeq: 8, GPUs: []link.GPUSummary{
		{LeaseID: "L1", GPU: 0, Device: "GPU-0", Samples: 4, First: t0, Last: t0.Add(6 * time.Minute),
			Util: link.Stat{N: 4, Min: 0, Max: 10, Sum: 15}, MemUsedMiB: link.Stat{N: 4, Min: 0, Max: 0, Sum: 0}},
		{LeaseID: "L1", GPU: 1, Device: "GPU-1", Samples: 3, First: t0.Add(time.Minute), Last: t0.Add(5 * time.Minute),
			Util: link.Stat{N: 2, Min: 90, Max: 95, Sum: 185}, MemUsedMiB: link.Stat{N: 3, Min: 40000, Max: 40000, Sum: 120000}},
	}}
	if d := cmp.Diff(wantSum, sum); d != "" {
		t.Errorf("summary (-want +got)\n%s", d)
	}
	if st := s.Stats(); st.Summarised != 7 || st.Records != 7 {
		t.Errorf("stats = %+v, want 7 summarised, 7 records", st)
	}
	if m := sum.GPUs[1].Util.Mean(); m != 92.5 {
		t.Errorf("GPU 1 mean util %v, want 92.5", m)
	}
}

func TestPeekedRecordsAreNotSummarised(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{SegmentRecords: 4, MaxRecords: 8})
	for i := 1; i <= 3; i++ {
		s.AppendSample(sample(i))
	}
	s.Peek(2) // 1 and 2 are on their way to the server
	for i := 4; i <= 9; i++ {
		s.AppendSample(sample(i))
	}
	recs, _ := s.Peek(100)
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, fmt.Sprintf("%d %s", r.Seq, r.Kind))
	}
	want := []string{"1 sample", "2 sample", "8 summary", "9 sample"}
	if d := cmp.Diff(want, kinds); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if recs[2].Summary.FromSeq != 3 {
		t.Errorf("summary from %d, want 3: sent records are not in it", recs[2].Summary.FromSeq)
	}
}

// TestCompactionCrashLeavesStaleSegments puts back a segment that a
// compaction had replaced, as a crash between its rename and its
// removals would leave it: Open must drop it, not deliver its samples a
// second time.
func TestCompactionCrashLeavesStaleSegments(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentRecords: 4, MaxRecords: 8}
	s := mustOpen(t, dir, o)
	for i := 1; i <= 8; i++ {
		s.AppendSample(sample(i))
	}
	second := filepath.Join(dir, "seg-00000000000000000005.log")
	saved, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	s.AppendSample(sample(9)) // over the bound: segments 1 and 5 compacted
	before, _ := s.Peek(100)
	s.crash()
	if _, err := os.Stat(second); !os.IsNotExist(err) {
		t.Fatalf("segment 5 still there after compaction: %v", err)
	}
	os.WriteFile(second, saved, 0o640)
	s = mustOpen(t, dir, o)
	after, _ := s.Peek(100)
	if d := cmp.Diff(jsonOf(t, before), jsonOf(t, after)); d != "" {
		t.Errorf("records after reopening with a stale segment (-before +after)\n%s", d)
	}
	if _, err := os.Stat(second); !os.IsNotExist(err) {
		t.Errorf("stale segment not removed")
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWake(t *testing.T) {
	s := mustOpen(t, t.TempDir(), Options{})
	s.AppendSample(sample(1))
	s.AppendSample(sample(2))
	select {
	case <-s.Wake():
	default:
		t.Fatal("no wake after an append")
	}
	select {
	case <-s.Wake():
		t.Fatal("two wakes for one wait: the channel should hold one")
	default:
	}
}

func BenchmarkAppendSample(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	x := sample(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.AppendSample(x); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPeekAck(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 20000; i++ {
		s.AppendSample(sample(i))
	}
	b.ResetTimer()
	for b.Loop() {
		recs, err := s.Peek(512)
		if err != nil || len(recs) == 0 {
			b.Fatal(err)
		}
		s.Ack(recs[len(recs)-1].Seq)
		for range recs {
			s.AppendSample(sample(1))
		}
	}
}
