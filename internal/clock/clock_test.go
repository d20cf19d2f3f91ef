package clock

import (
	"testing"
	"time"
)

func TestManualFiresInOrderWhenDue(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewManual(start)
	late := m.After(2 * time.Minute)
	early := m.After(time.Minute)
	m.Advance(30 * time.Second)
	select {
	case <-early:
		t.Fatal("fired before its deadline")
	default:
	}
	m.Advance(45 * time.Second)
	if got := <-early; !got.Equal(start.Add(75 * time.Second)) {
		t.Fatalf("early fired at %v", got)
	}
	if m.Pending() != 1 {
		t.Fatalf("pending = %d, want 1", m.Pending())
	}
	m.Advance(time.Hour)
	<-late
	if m.Pending() != 0 {
		t.Fatalf("pending = %d, want 0", m.Pending())
	}
	if now := <-m.After(0); !now.Equal(m.Now()) {
		t.Fatalf("After(0) = %v, want now", now)
	}
}
