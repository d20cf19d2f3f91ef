package spool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
)

// SyncPolicy says when the spool fsyncs (see the package doc).
type SyncPolicy int

// The policies.
const (
	// SyncBatch fsyncs sealed segments, events, Sync and Close.
	SyncBatch SyncPolicy = iota
	// SyncAlways fsyncs after every record.
	SyncAlways
)

// ErrClosed is returned by a closed spool.
var ErrClosed = errors.New("spool: closed")

// Options configure a spool.
type Options struct {
	// SegmentRecords is the most records per segment file (4096).
	SegmentRecords int
	// MaxRecords bounds the records kept (1,048,576); at least twice
	// SegmentRecords.
	MaxRecords int
	// Sync is the fsync policy.
	Sync SyncPolicy
	// Logger logs recoveries and compactions; nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentRecords == 0 {
		o.SegmentRecords = 4096
	}
	if o.MaxRecords == 0 {
		o.MaxRecords = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SegmentRecords < 1 {
		return o, &core.FieldError{Field: "segment_records", Value: strconv.Itoa(o.SegmentRecords), Allowed: ">= 1"}
	}
	if o.MaxRecords < 2*o.SegmentRecords {
		return o, &core.FieldError{Field: "max_records", Value: strconv.Itoa(o.MaxRecords), Allowed: fmt.Sprintf(">= 2 × segment_records (%d)", 2*o.SegmentRecords)}
	}
	return o, nil
}

const (
	segPrefix = "seg-"
	segSuffix = ".log"
	stateName = "state"
)

// segment is one file, with the sequence numbers and kinds of the records
// in it, in order.
type segment struct {
	path   string
	seqs   []uint64
	kinds  []link.Kind
	size   int64 // bytes of whole records
	synced int64 // bytes known to be on disk
	sealed bool
}

func (g *segment) last() uint64 { return g.seqs[len(g.seqs)-1] }

// Stats describe a spool.
type Stats struct {
	// Records is how many records wait to be acknowledged.
	Records int
	// Segments is how many segment files hold them.
	Segments int
	// NextSeq is the number the next record gets; Acked and Sent the
	// highest acknowledged and handed out by Peek.
	NextSeq, Acked, Sent uint64
	// Summarised counts the samples replaced by summaries since Open.
	Summarised int64
	// Truncated counts the segment tails cut off at Open as torn.
	Truncated int
}

// Spool is the outbox. Its methods are safe for concurrent use.
type Spool struct {
	dir string
	opt Options

	mu         sync.Mutex
	segs       []*segment
	active     *os.File // open for segs[len-1] while it is not sealed
	next       uint64
	acked      uint64
	sent       uint64
	live       int
	summarised int64
	truncated  int
	closed     bool
	cache      struct {
		path string
		recs []link.Record
	}
	wake chan struct{}
}

var _ link.Queue = (*Spool)(nil)

// Open opens the spool in dir, creating it if need be, and recovers what
// an earlier agent left: records not yet acknowledged are sent again,
// numbering goes on where it stopped.
func Open(dir string, o Options) (*Spool, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s := &Spool{dir: dir, opt: o, wake: make(chan struct{}, 1)}
	if s.acked, s.sent, err = readState(filepath.Join(dir, stateName)); err != nil {
		return nil, err
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Spool) recover() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	type file struct {
		path  string
		first uint64
	}
	var files []file
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			// A compaction or state write that did not finish.
			if err := os.Remove(filepath.Join(s.dir, name)); err != nil {
				return fmt.Errorf("spool: %w", err)
			}
			continue
		}
		if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, segPrefix), segSuffix), 10, 64)
		if err != nil {
			return fmt.Errorf("spool: %s: not a segment name", name)
		}
		files = append(files, file{filepath.Join(s.dir, name), n})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].first < files[j].first })
	var maxSeq uint64
	for _, f := range files {
		g, recs, err := s.load(f.path)
		if err != nil {
			return err
		}
		switch {
		case len(recs) == 0:
			err = os.Remove(f.path)
		case recs[0].Seq <= maxSeq:
			// Left over from a compaction that renamed its result but
			// had not yet removed the segments it replaced.
			s.opt.Logger.Info("spool: removing compacted segment", "path", f.path)
			err = os.Remove(f.path)
		case g.last() <= s.acked:
			err = os.Remove(f.path)
		default:
			g.sealed = true
			s.segs = append(s.segs, g)
			maxSeq = g.last()
		}
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
	}
	s.next = max(maxSeq, s.acked, s.sent) + 1
	s.sent = max(s.sent, s.acked)
	for _, g := range s.segs {
		s.live += countAbove(g.seqs, s.acked)
	}
	return syncDir(s.dir)
}

// countAbove returns how many of the sorted seqs are above n.
func countAbove(seqs []uint64, n uint64) int {
	return len(seqs) - sort.Search(len(seqs), func(i int) bool { return seqs[i] > n })
}

// load reads a segment file, cutting off a torn or corrupt tail.
func (s *Spool) load(path string) (*segment, []link.Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("spool: %w", err)
	}
	g := &segment{path: path}
	recs, good, err := decode(data)
	if err != nil {
		s.opt.Logger.Warn("spool: cutting a torn segment tail", "path", path, "at_byte", good, "of", len(data), "err", err)
		if err := os.Truncate(path, good); err != nil {
			return nil, nil, fmt.Errorf("spool: %w", err)
		}
		s.truncated++
	}
	for _, r := range recs {
		g.seqs = append(g.seqs, r.Seq)
		g.kinds = append(g.kinds, r.Kind)
	}
	g.size, g.synced = good, good
	return g, recs, nil
}

// decode parses records until the first bad one and returns the records,
// the length of the good prefix, and what was wrong after it.
func decode(data []byte) ([]link.Record, int64, error) {
	var recs []link.Record
	off := 0
	var prev uint64
	for off < len(data) {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return recs, int64(off), errors.New("incomplete last record")
		}
		r, err := decodeLine(data[off : off+nl])
		if err != nil {
			return recs, int64(off), err
		}
		if len(recs) > 0 && r.Seq <= prev {
			return recs, int64(off), fmt.Errorf("seq %d after %d", r.Seq, prev)
		}
		prev = r.Seq
		recs = append(recs, r)
		off += nl + 1
	}
	return recs, int64(off), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encode(r link.Record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("spool: encode seq %d: %w", r.Seq, err)
	}
	line := make([]byte, 0, len(body)+10)
	line = fmt.Appendf(line, "%08x ", crc32.Checksum(body, castagnoli))
	line = append(line, body...)
	return append(line, '\n'), nil
}

func decodeLine(line []byte) (link.Record, error) {
	var r link.Record
	if len(line) < 10 || line[8] != ' ' {
		return r, errors.New("malformed record")
	}
	want, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return r, errors.New("malformed checksum")
	}
	body := line[9:]
	if crc32.Checksum(body, castagnoli) != uint32(want) {
		return r, errors.New("checksum mismatch")
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("record: %w", err)
	}
	if err := r.Validate(); err != nil {
		return r, err
	}
	if r.Seq == 0 {
		return r, errors.New("record without a sequence number")
	}
	return r, nil
}

// AppendSample adds a sample and returns its sequence number.
func (s *Spool) AppendSample(x link.Sample) (uint64, error) {
	return s.append(link.Record{Kind: link.KindSample, Sample: &x})
}

// AppendEvent adds an event, fsynced before it returns, and returns its
// sequence number.
func (s *Spool) AppendEvent(e core.Event) (uint64, error) {
	return s.append(link.Record{Kind: link.KindEvent, Event: &e})
}

// Wake receives a value after records were appended, for the link's
// loop to send them without waiting for its timer.
func (s *Spool) Wake() <-chan struct{} { return s.wake }

func (s *Spool) append(r link.Record) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	r.Seq = s.next
	line, err := encode(r)
	if err != nil {
		return 0, err
	}
	if s.active == nil {
		if err := s.newSegment(r.Seq); err != nil {
			return 0, err
		}
	}
	g := s.segs[len(s.segs)-1]
	if n, err := s.active.Write(line); err != nil {
		// Cut the partial line off so the next record starts clean;
		// failing that, seal the segment (Open cuts it) and start anew.
		if n > 0 && s.active.Truncate(g.size) != nil {
			s.seal(g)
		}
		return 0, fmt.Errorf("spool: append seq %d: %w", r.Seq, err)
	}
	g.seqs = append(g.seqs, r.Seq)
	g.kinds = append(g.kinds, r.Kind)
	g.size += int64(len(line))
	s.next++
	s.live++
	if s.opt.Sync == SyncAlways || r.Kind == link.KindEvent {
		if err := s.active.Sync(); err != nil {
			return r.Seq, fmt.Errorf("spool: sync: %w", err)
		}
		g.synced = g.size
	}
	if len(g.seqs) >= s.opt.SegmentRecords {
		if err := s.seal(g); err != nil {
			return r.Seq, err
		}
	}
	if s.live > s.opt.MaxRecords {
		if err := s.compact(); err != nil {
			return r.Seq, err
		}
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return r.Seq, nil
}

func (s *Spool) newSegment(first uint64) error {
	path := filepath.Join(s.dir, fmt.Sprintf("%s%020d%s", segPrefix, first, segSuffix))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	// The directory entry must outlive a power cut as much as the data.
	if err := syncDir(s.dir); err != nil {
		f.Close()
		return err
	}
	s.active = f
	s.segs = append(s.segs, &segment{path: path})
	return nil
}

// seal fsyncs and closes the active segment.
func (s *Spool) seal(g *segment) error {
	if s.active == nil {
		return nil
	}
	err := s.active.Sync()
	if err == nil {
		g.synced = g.size
	}
	if cerr := s.active.Close(); err == nil {
		err = cerr
	}
	s.active = nil
	g.sealed = true
	if err != nil {
		return fmt.Errorf("spool: seal %s: %w", filepath.Base(g.path), err)
	}
	return nil
}

// read returns the records of g, from the cache for a sealed segment.
func (s *Spool) read(g *segment) ([]link.Record, error) {
	if g.sealed && s.cache.path == g.path {
		return s.cache.recs, nil
	}
	data, err := os.ReadFile(g.path)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	recs, _, err := decode(data[:min(int64(len(data)), g.size)])
	if err != nil {
		return nil, fmt.Errorf("spool: %s: %w", filepath.Base(g.path), err)
	}
	if len(recs) != len(g.seqs) {
		return nil, fmt.Errorf("spool: %s: %d records on disk, %d expected", filepath.Base(g.path), len(recs), len(g.seqs))
	}
	if g.sealed {
		s.cache.path, s.cache.recs = g.path, recs
	}
	return recs, nil
}

// Peek returns up to max of the oldest records not yet acknowledged, in
// order. They are on disk before Peek returns, and from then on they are
// never summarised.
func (s *Spool) Peek(max int) ([]link.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var out []link.Record
	for _, g := range s.segs {
		if len(out) >= max {
			break
		}
		if g.last() <= s.acked {
			continue
		}
		recs, err := s.read(g)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Seq <= s.acked {
				continue
			}
			out = append(out, r)
			if len(out) >= max {
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	if last := out[len(out)-1].Seq; last > s.sent {
		// What may reach the server must be on disk, and its numbers
		// never handed out again.
		if g := s.segs[len(s.segs)-1]; s.active != nil && g.synced < g.size {
			if err := s.active.Sync(); err != nil {
				return nil, fmt.Errorf("spool: sync: %w", err)
			}
			g.synced = g.size
		}
		if err := s.writeState(s.acked, last); err != nil {
			return nil, err
		}
		s.sent = last
	}
	return out, nil
}

// Ack says every record up to seq reached the server: they are dropped,
// and segments holding nothing else deleted.
func (s *Spool) Ack(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if seq <= s.acked {
		return nil
	}
	if seq >= s.next {
		return fmt.Errorf("spool: ack %d: beyond the last record %d", seq, s.next-1)
	}
	sent := max(s.sent, seq)
	if err := s.writeState(seq, sent); err != nil {
		return err
	}
	for _, g := range s.segs {
		s.live -= countAbove(g.seqs, s.acked) - countAbove(g.seqs, seq)
	}
	s.acked, s.sent = seq, sent
	kept := s.segs[:0]
	for i, g := range s.segs {
		if g.last() > s.acked {
			kept = append(kept, g)
			continue
		}
		if i == len(s.segs)-1 && s.active != nil {
			s.active.Close()
			s.active = nil
		}
		if s.cache.path == g.path {
			s.cache.path, s.cache.recs = "", nil
		}
		if err := os.Remove(g.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
	}
	s.segs = kept
	return nil
}

// Len returns how many records wait to be acknowledged.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// Stats returns the spool's counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Records: s.live, Segments: len(s.segs), NextSeq: s.next, Acked: s.acked, Sent: s.sent, Summarised: s.summarised, Truncated: s.truncated}
}

// Sync fsyncs the active segment.
func (s *Spool) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.active == nil {
		return nil
	}
	g := s.segs[len(s.segs)-1]
	if err := s.active.Sync(); err != nil {
		return fmt.Errorf("spool: sync: %w", err)
	}
	g.synced = g.size
	return nil
}

// Close fsyncs and closes the spool.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.active != nil {
		return s.seal(s.segs[len(s.segs)-1])
	}
	return nil
}

// writeState replaces the state file atomically and durably.
func (s *Spool) writeState(acked, sent uint64) error {
	path := filepath.Join(s.dir, stateName)
	tmp := path + ".tmp"
	body := fmt.Sprintf("gpufleet-spool 1\nacked %d\nsent %d\n", acked, sent)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("spool: state: %w", err)
	}
	_, err = f.WriteString(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("spool: state: %w", err)
	}
	return syncDir(s.dir)
}

func readState(path string) (acked, sent uint64, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("spool: state: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	fields := map[string]*uint64{"acked": &acked, "sent": &sent}
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != "gpufleet-spool 1" {
				return 0, 0, &core.ParseError{File: path, Line: 1, Value: text, Problem: "unknown header", Allowed: "gpufleet-spool 1"}
			}
			continue
		}
		k, v, _ := strings.Cut(text, " ")
		p, ok := fields[k]
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			return 0, 0, &core.ParseError{File: path, Line: line, Field: k, Value: v, Allowed: "acked N or sent N"}
		}
		*p = n
	}
	if line < 3 {
		return 0, 0, &core.ParseError{File: path, Line: line, Problem: "truncated state file", Allowed: "a header, acked and sent"}
	}
	return acked, sent, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("spool: sync %s: %w", dir, err)
	}
	return nil
}
