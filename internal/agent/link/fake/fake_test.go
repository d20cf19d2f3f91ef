package fake

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/agent/link"
	"github.com/gpufleet/gpufleet/internal/core"
)

func rec(seq uint64, kind link.Kind) link.Record {
	r := link.Record{Seq: seq, Kind: kind}
	switch kind {
	case link.KindSample:
		r.Sample = &link.Sample{}
	case link.KindEvent:
		r.Event = &core.Event{}
	case link.KindSummary:
		r.Summary = &link.Summary{}
	}
	return r
}

func TestServerAppliesOnceAtomically(t *testing.T) {
	ctx := context.Background()
	s := New()
	if err := s.SendSamples(ctx, []link.Record{rec(1, link.KindSample), rec(3, link.KindSummary)}); err != nil {
		t.Fatal(err)
	}
	// Sent again with one more: the first two are duplicates.
	if err := s.SendSamples(ctx, []link.Record{rec(1, link.KindSample), rec(3, link.KindSummary), rec(4, link.KindSample)}); err != nil {
		t.Fatal(err)
	}
	if got := len(s.Records()); got != 3 || s.Duplicates() != 2 {
		t.Errorf("records %d duplicates %d, want 3 and 2", got, s.Duplicates())
	}
	for _, bad := range []struct {
		recs   []link.Record
		events bool
		want   string
	}{
		{[]link.Record{rec(6, link.KindSample), rec(5, link.KindSample)}, false, "out of order"},
		{[]link.Record{rec(7, link.KindEvent)}, false, "wrong call"},
		{[]link.Record{rec(7, link.KindSample)}, true, "wrong call"},
		{[]link.Record{{Seq: 7, Kind: link.KindSample}}, false, "record 0"},
	} {
		var err error
		if bad.events {
			err = s.SendEvents(ctx, bad.recs)
		} else {
			err = s.SendSamples(ctx, bad.recs)
		}
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("err = %v, want %q", err, bad.want)
		}
	}
	if got := len(s.Records()); got != 3 {
		t.Errorf("a refused batch was partly applied: %d records", got)
	}
	s.SetDown(true)
	if err := s.Heartbeat(ctx, link.Heartbeat{}); !errors.Is(err, ErrDown) {
		t.Errorf("down: %v", err)
	}
	s.SetDown(false)
	s.LoseReplies(1)
	if err := s.SendEvents(ctx, []link.Record{rec(8, link.KindEvent)}); !errors.Is(err, ErrReplyLost) {
		t.Errorf("lost reply: %v", err)
	}
	if got := len(s.Records()); got != 4 {
		t.Errorf("a lost reply's batch was not applied: %d records", got)
	}
	s.Push(link.Command{ID: "c"})
	if cmds, _ := s.FetchCommands(ctx); len(cmds) != 1 {
		t.Errorf("commands = %v", cmds)
	}
	if cmds, _ := s.FetchCommands(ctx); len(cmds) != 0 {
		t.Errorf("commands fetched twice: %v", cmds)
	}
}
