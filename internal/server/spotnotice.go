package server

import (
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/engine"
	"github.com/gpufleet/gpufleet/internal/store"
)

// spotNoticeReport is the kind of an agent's report of a spot
// interruption notice it read on its machine (agent.EventSpotNotice,
// stored by the API's events route).
const spotNoticeReport = "spot-notice"

// spotNotice acts on an agent's spot notice as on a provider's
// Reclaiming event (tick.go): the lease the agent serves gets the
// notice's time as ReclaimAt through engine.OnReclaimNotice, and the
// agents' commands after the step (agentTick.commands) then tell each
// run on it to checkpoint. Clouds whose API shows no notice (EC2: only
// the instance's metadata does) reach the engine this way; the reclaim
// itself comes from the provider, which sees the machine end.
//
// A notice of an agent that serves no live lease, one whose time cannot
// be read, or one no sooner than the ReclaimAt the lease has is
// recorded in the trail and changes nothing.
func (l *Loop) spotNotice(st *engine.State, t *agentTick, rep store.AgentReport, now time.Time) []core.Event {
	ignored := func(why string) []core.Event {
		return []core.Event{{At: now, Kind: "reclaim-notice.ignored", Subject: rep.Agent, Attrs: map[string]string{"agent": rep.Agent},
			Reason: fmt.Sprintf("agent %s reported a spot notice (%s): %s", rep.Agent, orDash(rep.Attrs["reclaim_at"]), why)}}
	}
	at, err := time.Parse(time.RFC3339, rep.Attrs["reclaim_at"])
	if err != nil {
		return ignored("its reclaim_at is not an RFC 3339 time")
	}
	var leaseID string
	for _, a := range t.agents {
		if a.ID == rep.Agent {
			leaseID = a.LeaseID
		}
	}
	var le *engine.Lease
	for _, x := range st.Leases {
		if x.ID == leaseID && !x.State.Final() {
			le = x
		}
	}
	switch {
	case le == nil:
		return ignored("the agent serves no live lease")
	case !le.ReclaimAt.IsZero() && !at.Before(le.ReclaimAt):
		return nil // known already
	}
	events := []core.Event{{At: now, Kind: "lease.reclaiming", Subject: le.ID, Attrs: map[string]string{"agent": rep.Agent},
		Reason: fmt.Sprintf("agent %s reports a spot interruption notice: machine %s goes at %s", rep.Agent, le.ProviderID, at.UTC().Format(time.RFC3339))}}
	for _, rc := range engine.OnReclaimNotice(st, le.ID, now, at, l.cfg.Engine) {
		events = append(events, core.Event{At: now, Kind: "reclaim-notice", Subject: rc.Unit, Reason: rc.Reason})
	}
	// As for a provider's notice: the agents checkpoint the runs (the
	// commands after the step), which run on until the machine goes.
	engine.ResumeCheckpointed(st, le.ID)
	return events
}
