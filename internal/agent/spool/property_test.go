package spool

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
)

// server is the model of a server: it applies records above its
// high-water mark and remembers everything it applied.
type server struct {
	hwm     uint64
	applied []link.Record
	bySeq   map[uint64]string // seq → JSON of the record applied
}

func (sv *server) apply(t *rapid.T, recs []link.Record) {
	for _, r := range recs {
		b, _ := json.Marshal(r)
		if r.Seq <= sv.hwm {
			// Sent again after a lost reply: it must be the very record
			// applied before, not a new one with an old number.
			if prev, ok := sv.bySeq[r.Seq]; !ok || prev != string(b) {
				t.Fatalf("seq %d at or below the high-water mark %d is not a record already applied:\n%s\nbefore: %q", r.Seq, sv.hwm, b, prev)
			}
			continue
		}
		sv.hwm = r.Seq
		sv.applied = append(sv.applied, r)
		sv.bySeq[r.Seq] = string(b)
	}
}

// TestPropertyNothingLostOrDuplicated runs random appends, deliveries
// (that succeed, fail, or lose their reply), syncs, clean reopens and
// crashes (the agent killed: files closed unsynced, no state written) on
// a spool with small segments and a small bound. Draining at the end, the
// server must have every event once, in order, and every sample either
// once as itself or counted in exactly one summary whose numbers are
// exactly those of the samples it stands for.
func TestPropertyNothingLostOrDuplicated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "spool-prop-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		seg := rapid.IntRange(1, 6).Draw(t, "segment_records")
		o := Options{SegmentRecords: seg, MaxRecords: rapid.IntRange(2*seg, 4*seg+3).Draw(t, "max_records"), Sync: SyncPolicy(rapid.IntRange(0, 1).Draw(t, "sync"))}
		s, err := Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { s.Close() }()
		appended := map[uint64]link.Record{}
		var lastSeq uint64
		sv := &server{bySeq: map[uint64]string{}}
		step := 0
		appendRec := func(r link.Record) {
			var seq uint64
			var err error
			if r.Kind == link.KindEvent {
				seq, err = s.AppendEvent(*r.Event)
			} else {
				seq, err = s.AppendSample(*r.Sample)
			}
			if err != nil {
				t.Fatal(err)
			}
			if seq <= lastSeq {
				t.Fatalf("seq %d after %d", seq, lastSeq)
			}
			lastSeq = seq
			r.Seq = seq
			appended[seq] = r
		}
		t.Repeat(map[string]func(*rapid.T){
			"sample": func(t *rapid.T) {
				step++
				gpu := rapid.IntRange(0, 2).Draw(t, "gpu")
				x := link.Sample{LeaseID: "L1", GPU: gpu, UUID: fmt.Sprintf("GPU-%d", gpu), At: t0.Add(time.Duration(step) * time.Second),
					UtilPct: rapid.IntRange(-1, 100).Draw(t, "util"), MemUsedMiB: int64(rapid.IntRange(-1, 80000).Draw(t, "mem")), Processes: link.Unknown}
				appendRec(link.Record{Kind: link.KindSample, Sample: &x})
			},
			"event": func(t *rapid.T) {
				step++
				appendRec(link.Record{Kind: link.KindEvent, Event: &core.Event{At: t0.Add(time.Duration(step) * time.Second), Kind: "job-exited", Subject: fmt.Sprintf("j%d", step)}})
			},
			"deliver": func(t *rapid.T) {
				recs, err := s.Peek(rapid.IntRange(1, 2*seg+2).Draw(t, "batch"))
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) == 0 {
					return
				}
				switch rapid.SampledFrom([]string{"ok", "lost-reply", "refused"}).Draw(t, "outcome") {
				case "ok":
					sv.apply(t, recs)
					if err := s.Ack(recs[len(recs)-1].Seq); err != nil {
						t.Fatal(err)
					}
				case "lost-reply":
					sv.apply(t, recs)
				}
			},
			"sync": func(t *rapid.T) {
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
			},
			"reopen": func(t *rapid.T) {
				if rapid.Bool().Draw(t, "crash") {
					s.crash()
				} else if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if s, err = Open(dir, o); err != nil {
					t.Fatal(err)
				}
			},
			"": func(t *rapid.T) {
				// The bound holds but for what may not be summarised.
				s.mu.Lock()
				defer s.mu.Unlock()
				fixed := 0
				for _, g := range s.segs {
					for i, seq := range g.seqs {
						if seq > s.acked && (seq <= s.sent || g.kinds[i] == link.KindEvent) {
							fixed++
						}
					}
				}
				if s.live > o.MaxRecords && s.live > fixed+1+o.SegmentRecords {
					t.Fatalf("%d records kept, bound %d, %d not summarisable", s.live, o.MaxRecords, fixed)
				}
			},
		})
		for {
			recs, err := s.Peek(1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			sv.apply(t, recs)
			if err := s.Ack(recs[len(recs)-1].Seq); err != nil {
				t.Fatal(err)
			}
		}
		checkAccounted(t, appended, sv.applied)
	})
}

// checkAccounted checks that applied accounts for appended exactly.
func checkAccounted(t *rapid.T, appended map[uint64]link.Record, applied []link.Record) {
	seen := map[uint64]bool{}
	type span struct{ from, to uint64 }
	var spans []span
	for i, r := range applied {
		if i > 0 && r.Seq <= applied[i-1].Seq {
			t.Fatalf("applied out of order: %d after %d", r.Seq, applied[i-1].Seq)
		}
		switch r.Kind {
		case link.KindSample, link.KindEvent:
			want, ok := appended[r.Seq]
			if !ok {
				t.Fatalf("applied seq %d was never appended", r.Seq)
			}
			a, _ := json.Marshal(want)
			b, _ := json.Marshal(r)
			if string(a) != string(b) {
				t.Fatalf("seq %d changed on its way:\nappended %s\napplied  %s", r.Seq, a, b)
			}
			seen[r.Seq] = true
		case link.KindSummary:
			sum := r.Summary
			if sum.FromSeq > sum.ToSeq || sum.ToSeq != r.Seq {
				t.Fatalf("summary seq %d spans [%d, %d]", r.Seq, sum.FromSeq, sum.ToSeq)
			}
			spans = append(spans, span{sum.FromSeq, sum.ToSeq})
			// Recompute it from what was appended in its span.
			want := &summary{gpus: map[[3]string]*link.GPUSummary{}}
			for seq := sum.FromSeq; seq <= sum.ToSeq; seq++ {
				if a, ok := appended[seq]; ok && a.Kind == link.KindSample {
					want.addSample(seq, a.Sample)
					seen[seq] = true
				}
			}
			wr := want.record(r.Seq)
			wr.Summary.FromSeq, wr.Summary.ToSeq = sum.FromSeq, sum.ToSeq
			if d := cmp.Diff(wr.Summary, sum); d != "" {
				t.Fatalf("summary seq %d does not match its samples (-want +got)\n%s", r.Seq, d)
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	for i := 1; i < len(spans); i++ {
		if spans[i].from <= spans[i-1].to {
			t.Fatalf("summaries overlap: %v and %v", spans[i-1], spans[i])
		}
	}
	for _, r := range applied {
		if r.Kind == link.KindSample {
			for _, sp := range spans {
				if r.Seq >= sp.from && r.Seq <= sp.to {
					t.Fatalf("sample %d applied and also summarised in [%d, %d]", r.Seq, sp.from, sp.to)
				}
			}
		}
	}
	for seq, a := range appended {
		if !seen[seq] {
			t.Fatalf("%s %d lost", a.Kind, seq)
		}
	}
}

// TestPropertyTornTail cuts the active segment, after a crash, anywhere
// past what was fsynced, as a power loss might: what Open finds is a
// prefix of what was appended that holds everything synced, and the
// spool goes on numbering without reusing a number it handed out.
func TestPropertyTornTail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "spool-torn-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		o := Options{SegmentRecords: rapid.IntRange(1, 8).Draw(t, "segment_records"), MaxRecords: 1000}
		s, err := Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		var appended []link.Record
		var durable, sent uint64
		n := rapid.IntRange(1, 40).Draw(t, "records")
		for i := 1; i <= n; i++ {
			x := sample(i)
			var seq uint64
			if rapid.IntRange(0, 9).Draw(t, "kind") == 0 {
				seq, err = s.AppendEvent(core.Event{At: t0, Kind: "job-exited", Subject: fmt.Sprint(i)})
				durable = seq
			} else {
				seq, err = s.AppendSample(x)
			}
			if err != nil {
				t.Fatal(err)
			}
			appended = append(appended, link.Record{Seq: seq})
			switch rapid.IntRange(0, 5).Draw(t, "then") {
			case 0:
				s.Sync()
				durable = seq
			case 1:
				if recs, _ := s.Peek(rapid.IntRange(1, n).Draw(t, "peek")); len(recs) > 0 {
					sent = max(sent, recs[len(recs)-1].Seq)
					durable = max(durable, sent)
				}
			}
			if i%o.SegmentRecords == 0 {
				durable = seq // sealed
			}
		}
		path, synced, size := s.crash()
		if path != "" && size > synced {
			cut := synced + int64(rapid.IntRange(0, int(size-synced)).Draw(t, "cut"))
			if err := os.Truncate(path, cut); err != nil {
				t.Fatal(err)
			}
		}
		s, err = Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		got, err := s.Peek(1000)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			if r.Seq != uint64(i+1) {
				t.Fatalf("after the cut: record %d has seq %d, not a prefix", i, r.Seq)
			}
		}
		if uint64(len(got)) < durable {
			t.Fatalf("after the cut: %d records, but %d were durable", len(got), durable)
		}
		seq, err := s.AppendSample(sample(0))
		if err != nil {
			t.Fatal(err)
		}
		if seq <= sent || seq != max(uint64(len(got)), sent)+1 {
			t.Fatalf("next seq %d: %d survive, %d were sent", seq, len(got), sent)
		}
	})
}
