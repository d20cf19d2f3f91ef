package sched

import (
	"fmt"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Move is a decision to checkpoint a running unit and restart it on
// other GPUs, so that its machine empties and can be released.
type Move struct {
	Unit   Unit
	From   int
	To     []Part
	Reason string
}

// Drain is a node worth emptying. OntoPaid restricts where its units may
// go to time already paid for: a committed node whose paid time
// (State.NodePaidUntil) lasts past the unit's estimated end, so that the
// move frees the node without making another one renew.
type Drain struct {
	Node     int
	OntoPaid bool
}

// Consolidate tries, for each node in drain (most promising first), to
// move every unit running there onto the other nodes' free capacity, as
// the state stands after the placements in d. Only interruptible units
// past their minimum runtime move, and a node is drained whole or not at
// all: the moves are tried hypothetically and rolled back unless all of
// them fit. A node emptied this pass receives nothing, and a node that
// received work is not drained after.
func Consolidate(st *State, d Decisions, drain []Drain, cfg Config) []Move {
	if len(drain) == 0 {
		return nil
	}
	cfg = cfg.withDefaults()
	var gone map[string]bool
	if len(d.Preemptions) > 0 {
		gone = make(map[string]bool, len(d.Preemptions))
	}
	for _, p := range d.Preemptions {
		gone[p.Victim.Key()] = true
	}
	// Only the nodes to drain need their units listed.
	onNode := make(map[int][]Allocation, len(drain))
	for _, dr := range drain {
		onNode[dr.Node] = nil
	}
	for _, a := range st.Running {
		if len(a.Parts) != 1 {
			continue
		}
		units, ok := onNode[a.Parts[0].Node]
		if !ok || gone != nil && gone[a.Key()] {
			continue
		}
		onNode[a.Parts[0].Node] = append(units, a)
	}
	movable := func(units []Allocation) bool {
		for _, a := range units {
			if !a.Job.Interruptible || a.Job.Tier == core.TierCore || st.Now.Sub(a.Start) < cfg.MinRuntime {
				return false
			}
		}
		return len(units) > 0
	}
	// Most steps' candidates hold work that may not move: the placer,
	// the costly part, is built only when some may.
	if !slices.ContainsFunc(drain, func(dr Drain) bool { return movable(onNode[dr.Node]) }) {
		return nil
	}
	var ps *placerScratch
	if st.Scratch != nil {
		ps = &st.Scratch.consolidate
	}
	pl := newPlacer(ps, st.Nodes, st.NodeCost, st.Pending, cfg.Scorer)
	for _, p := range d.Preemptions {
		pl.remove(&p.Victim.Unit, p.Victim.Parts)
	}
	for _, p := range d.Placements {
		pl.place(&p.Unit, p.Parts)
	}
	// drained: nodes emptied (or being emptied) this pass — they take
	// nothing; received: nodes that took moved work — they are no longer
	// worth draining.
	drained, received := map[int]bool{}, map[int]bool{}
	var moves []Move
	for _, dr := range drain {
		n := dr.Node
		units := onNode[n]
		if received[n] || !movable(units) {
			continue
		}
		drained[n] = true
		for _, a := range units {
			pl.remove(&a.Unit, a.Parts)
		}
		var planned []Move
		ok := true
		for _, a := range units {
			a := a
			end, known := a.EstEnd()
			allowed := func(m int) bool {
				if dr.OntoPaid && (!pl.nodes[m].Committed || m >= len(st.NodePaidUntil) || known && st.NodePaidUntil[m].Before(end)) {
					return false
				}
				return !drained[m] && (!pl.nodes[m].Spot || a.Job.Interruptible)
			}
			to, gpus, found := pl.find(&a.Job.Request, allowed)
			if !found {
				ok = false
				break
			}
			parts := []Part{{Node: to, GPUs: gpus}}
			pl.place(&a.Unit, parts)
			planned = append(planned, Move{Unit: a.Unit, From: n, To: parts,
				Reason: fmt.Sprintf("moved from %s to %s so that %s empties and is released (checkpoint and restart)", st.Nodes[n].LeaseID, st.Nodes[to].LeaseID, st.Nodes[n].LeaseID)})
		}
		if !ok {
			// Roll back: undo the moves made, give the node its units back.
			for _, m := range planned {
				pl.remove(&m.Unit, m.To)
			}
			for _, a := range units {
				pl.place(&a.Unit, a.Parts)
			}
			delete(drained, n)
			continue
		}
		for _, m := range planned {
			received[m.To[0].Node] = true
		}
		moves = append(moves, planned...)
	}
	return moves
}
