package engine

import "strconv"

// Resolving a running unit's parts to the state's leases is done at every
// step and every Apply, for every running unit: by a map from lease ID,
// built afresh each time, it was a large part of a replay's time (a
// replay takes millions of steps over a fleet of about the same size).
// The leases found are kept instead — each unit remembers the leases of
// its parts, and the ID map is kept between calls — and checked before
// use, so a stale answer is never used: a cached lease counts only while
// its ID still matches the part's and it is still one of State.Leases.
//
// Lease IDs are unique within State.Leases (Apply numbers them from
// NextID; the store keys them by ID). The caches rely on that, as the
// maps they replace did.

// stampLeases begins a resolution pass over st.Leases as they stand now:
// it marks every lease with a new stamp (a cached lease is current only
// if it carries the pass's stamp) and notices when the list differs from
// the one the ID map was built over. Call it again after st.Leases
// changes.
func (st *State) stampLeases() uint64 {
	sc := st.scratchOf()
	sc.gen++
	gen := sc.gen
	same := len(sc.byIDOf) == len(st.Leases)
	for i, l := range st.Leases {
		l.gen = gen
		if same && (sc.byIDOf[i] != l || sc.byIDIDs[i] != l.ID) {
			same = false
		}
	}
	if !same {
		sc.byIDOf = sc.byIDOf[:0] // rebuilt when next asked for
	}
	return gen
}

// leaseIndex maps lease IDs to st.Leases (the last of an ID wins, as in
// any map filled in order). It is rebuilt only when stampLeases found the
// list changed; call it only after stampLeases.
func (st *State) leaseIndex() map[string]*Lease {
	sc := st.scratchOf()
	if sc.byID != nil && len(sc.byIDOf) == len(st.Leases) && len(st.Leases) > 0 {
		return sc.byID
	}
	if sc.byID == nil {
		sc.byID = make(map[string]*Lease, len(st.Leases))
	}
	clear(sc.byID)
	sc.byIDOf, sc.byIDIDs = sc.byIDOf[:0], sc.byIDIDs[:0]
	for _, l := range st.Leases {
		sc.byID[l.ID] = l
		sc.byIDOf = append(sc.byIDOf, l)
		sc.byIDIDs = append(sc.byIDIDs, l.ID)
	}
	return sc.byID
}

// partLease returns the lease of u's part i among st.Leases, or nil: what
// leaseIndex()[u.Parts[i].LeaseID] returns, from the unit's cache when it
// holds. gen is the current stampLeases stamp.
func (st *State) partLease(u *Unit, i int, gen uint64) *Lease {
	id := u.Parts[i].LeaseID
	if i < len(u.on) {
		if l := u.on[i]; l != nil && l.gen == gen && l.ID == id {
			return l
		}
	}
	l := st.leaseIndex()[id]
	if len(u.on) != len(u.Parts) {
		u.on = make([]*Lease, len(u.Parts))
	}
	u.on[i] = l
	return l
}

// stampUnits marks every unit of st.Units with a new stamp, so that a
// unit pointer kept since (a decision's) can be checked to still be one
// of them.
func (st *State) stampUnits() uint64 {
	sc := st.scratchOf()
	sc.gen++
	for _, u := range st.Units {
		u.gen = sc.gen
	}
	return sc.gen
}

// hasKey reports whether u.Key() == key, without building the key of a
// shard.
func (u *Unit) hasKey(key string) bool {
	id := u.Job.ID
	if u.Job.Shards <= 1 {
		return key == id
	}
	if len(key) <= len(id) || key[:len(id)] != id || key[len(id)] != '#' {
		return false
	}
	var b [20]byte
	return key[len(id)+1:] == string(strconv.AppendInt(b[:0], int64(u.Shard), 10))
}
