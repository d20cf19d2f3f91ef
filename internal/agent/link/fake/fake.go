package fake

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gpufleet/gpufleet/internal/agent/link"
)

// ErrDown is what a partitioned server's calls fail with.
var ErrDown = errors.New("fake: server unreachable")

// ErrReplyLost is what a call fails with when the server applied it but
// its reply was lost.
var ErrReplyLost = errors.New("fake: reply lost")

// Server is the fake. Its zero value is not ready; use New.
type Server struct {
	mu         sync.Mutex
	down       bool
	failNext   int
	loseReply  int
	applied    uint64
	records    []link.Record
	duplicates int
	heartbeats []link.Heartbeat
	commands   []link.Command
	calls      int
	reject     int // an HTTP status every call fails with; 0: none
	changed    chan struct{}
}

var _ link.Uplink = (*Server)(nil)

// New returns a reachable server with nothing received.
func New() *Server { return &Server{changed: make(chan struct{})} }

// SetDown partitions the server (every call fails with ErrDown) or heals
// it.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// FailNext makes the next n calls fail with ErrDown.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = n
}

// Reject makes every call fail as a server refusing the agent's token
// does, with a *link.Error of status (401 or 403); 0 accepts again.
func (s *Server) Reject(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject = status
}

// LoseReplies makes the next n calls that send records apply them and
// then fail with ErrReplyLost, as when the connection drops after the
// server committed.
func (s *Server) LoseReplies(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseReply = n
}

// Push queues commands for the agent's next fetch.
func (s *Server) Push(cmds ...link.Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = append(s.commands, cmds...)
}

// Records returns every record applied, in the order applied.
func (s *Server) Records() []link.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]link.Record(nil), s.records...)
}

// Heartbeats returns every heartbeat received.
func (s *Server) Heartbeats() []link.Heartbeat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]link.Heartbeat(nil), s.heartbeats...)
}

// Duplicates returns how many records arrived again after being applied.
func (s *Server) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicates
}

// Calls returns how many calls the server has answered or refused.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Changed returns a channel closed at the next applied record or
// heartbeat, for tests to wait on without polling.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// notify wakes whoever waits on Changed; s.mu must be held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// refuse reports whether this call fails before it is applied; s.mu must
// be held.
func (s *Server) refuse(ctx context.Context) error {
	s.calls++
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.down {
		return ErrDown
	}
	if s.reject != 0 {
		return &link.Error{Method: "POST", Path: "/fake", Status: s.reject, Code: "unauthenticated", Message: "fake: token refused"}
	}
	if s.failNext > 0 {
		s.failNext--
		return ErrDown
	}
	return nil
}

// Heartbeat records hb.
func (s *Server) Heartbeat(ctx context.Context, hb link.Heartbeat) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refuse(ctx); err != nil {
		return err
	}
	s.heartbeats = append(s.heartbeats, hb)
	s.notify()
	return nil
}

// SendSamples applies sample and summary records.
func (s *Server) SendSamples(ctx context.Context, recs []link.Record) error {
	return s.apply(ctx, recs, false)
}

// SendEvents applies event records.
func (s *Server) SendEvents(ctx context.Context, recs []link.Record) error {
	return s.apply(ctx, recs, true)
}

// apply checks the whole batch, then applies the records above the
// high-water mark: all or nothing.
func (s *Server) apply(ctx context.Context, recs []link.Record, events bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refuse(ctx); err != nil {
		return err
	}
	prev := uint64(0)
	for i, r := range recs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("fake: record %d: %w", i, err)
		}
		if (r.Kind == link.KindEvent) != events {
			return fmt.Errorf("fake: record %d (seq %d) is a %s, sent with the wrong call", i, r.Seq, r.Kind)
		}
		if i > 0 && r.Seq <= prev {
			return fmt.Errorf("fake: record %d: seq %d after %d: out of order", i, r.Seq, prev)
		}
		prev = r.Seq
	}
	for _, r := range recs {
		if r.Seq <= s.applied {
			s.duplicates++
			continue
		}
		s.applied = r.Seq
		s.records = append(s.records, r)
	}
	s.notify()
	if s.loseReply > 0 {
		s.loseReply--
		return ErrReplyLost
	}
	return nil
}

// FetchCommands returns and forgets the queued commands.
func (s *Server) FetchCommands(ctx context.Context) ([]link.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refuse(ctx); err != nil {
		return nil, err
	}
	cmds := s.commands
	s.commands = nil
	return cmds, nil
}
