package spool

import (
	"fmt"
	"os"
	"sort"

	"github.com/gpufleet/gpufleet/internal/agent/link"
)

// compact brings the spool back under its bound, down to MaxRecords less
// one segment so that it does not compact again at the next record. It
// rewrites the shortest run of oldest sealed segments that gets there (or
// all of them) as one: records handed out by Peek and events as they
// are, every other sample and summary merged into one Summary at the
// place of the last of them. s.mu must be held.
func (s *Spool) compact() error {
	target := s.opt.MaxRecords - s.opt.SegmentRecords
	sealed := len(s.segs)
	if s.active != nil {
		sealed--
	}
	best, bestGain := 0, 0
	merged := 0
	for k := 0; k < sealed; k++ {
		g := s.segs[k]
		for i, seq := range g.seqs {
			if seq > s.acked && seq > s.sent && g.kinds[i] != link.KindEvent {
				merged++
			}
		}
		// One summary replaces what is merged.
		if n := merged - min(merged, 1); n > bestGain {
			best, bestGain = k+1, n
			if s.live-n <= target {
				break
			}
		}
	}
	if bestGain <= 0 {
		s.opt.Logger.Warn("spool: over its bound with nothing to summarise", "records", s.live, "max", s.opt.MaxRecords)
		return nil
	}
	return s.rewrite(best)
}

// summary accumulates samples and summaries into one Summary.
type summary struct {
	from, to uint64
	samples  int64
	gpus     map[[3]string]*link.GPUSummary
}

func gpuKey(lease string, gpu int, device string) [3]string {
	return [3]string{lease, fmt.Sprint(gpu), device}
}

func (m *summary) span(from, to uint64) {
	if m.from == 0 || from < m.from {
		m.from = from
	}
	m.to = max(m.to, to)
}

func (m *summary) entry(lease string, gpu int, device string) *link.GPUSummary {
	k := gpuKey(lease, gpu, device)
	e := m.gpus[k]
	if e == nil {
		e = &link.GPUSummary{LeaseID: lease, GPU: gpu, Device: device}
		m.gpus[k] = e
	}
	return e
}

func (m *summary) addSample(seq uint64, x *link.Sample) {
	m.span(seq, seq)
	m.samples++
	e := m.entry(x.LeaseID, x.GPU, x.Device())
	if e.Samples == 0 || x.At.Before(e.First) {
		e.First = x.At
	}
	if e.Samples == 0 || x.At.After(e.Last) {
		e.Last = x.At
	}
	e.Samples++
	e.Util.Add(int64(x.UtilPct))
	e.MemUsedMiB.Add(x.MemUsedMiB)
}

func (m *summary) addSummary(x *link.Summary) {
	m.span(x.FromSeq, x.ToSeq)
	for _, g := range x.GPUs {
		e := m.entry(g.LeaseID, g.GPU, g.Device)
		if e.Samples == 0 || g.First.Before(e.First) {
			e.First = g.First
		}
		if e.Samples == 0 || g.Last.After(e.Last) {
			e.Last = g.Last
		}
		e.Samples += g.Samples
		e.Util.Merge(g.Util)
		e.MemUsedMiB.Merge(g.MemUsedMiB)
	}
}

func (m *summary) record(seq uint64) link.Record {
	out := &link.Summary{FromSeq: m.from, ToSeq: m.to}
	for _, e := range m.gpus {
		out.GPUs = append(out.GPUs, *e)
	}
	sort.Slice(out.GPUs, func(i, j int) bool {
		a, b := out.GPUs[i], out.GPUs[j]
		if a.LeaseID != b.LeaseID {
			return a.LeaseID < b.LeaseID
		}
		if a.GPU != b.GPU {
			return a.GPU < b.GPU
		}
		return a.Device < b.Device
	})
	return link.Record{Seq: seq, Kind: link.KindSummary, Summary: out}
}

// rewrite compacts the k oldest segments into one file, written beside
// them and renamed over the first; a crash between the rename and the
// removal of the others leaves segments that Open recognises (their
// numbers are not above the compacted file's) and removes.
func (s *Spool) rewrite(k int) error {
	group := s.segs[:k]
	var kept []link.Record
	m := &summary{gpus: map[[3]string]*link.GPUSummary{}}
	var mergedLast uint64
	for _, g := range group {
		recs, err := s.read(g)
		if err != nil {
			return err
		}
		for _, r := range recs {
			switch {
			case r.Seq <= s.acked:
				continue
			case r.Seq <= s.sent || r.Kind == link.KindEvent:
				kept = append(kept, r)
				continue
			case r.Kind == link.KindSample:
				m.addSample(r.Seq, r.Sample)
			case r.Kind == link.KindSummary:
				m.addSummary(r.Summary)
			}
			mergedLast = r.Seq
		}
	}
	out := kept
	if mergedLast > 0 {
		rec := m.record(mergedLast)
		i := sort.Search(len(kept), func(i int) bool { return kept[i].Seq > mergedLast })
		out = append(append(append([]link.Record(nil), kept[:i]...), rec), kept[i:]...)
	}
	first := group[0].path
	tmp := first + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("spool: compact: %w", err)
	}
	ng := &segment{path: first, sealed: true}
	for _, r := range out {
		line, err := encode(r)
		if err == nil {
			_, err = f.Write(line)
		}
		if err != nil {
			f.Close()
			os.Remove(tmp)
			return fmt.Errorf("spool: compact: %w", err)
		}
		ng.seqs = append(ng.seqs, r.Seq)
		ng.kinds = append(ng.kinds, r.Kind)
		ng.size += int64(len(line))
	}
	ng.synced = ng.size
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, first)
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("spool: compact: %w", err)
	}
	for _, g := range group[1:] {
		if err := os.Remove(g.path); err != nil {
			return fmt.Errorf("spool: compact: %w", err)
		}
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	before := 0
	for _, g := range group {
		before += countAbove(g.seqs, s.acked)
	}
	s.live += len(out) - before
	s.summarised += m.samples
	s.cache.path, s.cache.recs = "", nil
	s.segs = append([]*segment{ng}, s.segs[k:]...)
	s.opt.Logger.Info("spool: summarised oldest samples", "samples", m.samples, "from_seq", m.from, "to_seq", m.to, "records", s.live)
	return nil
}
