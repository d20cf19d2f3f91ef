package engine

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyResolveCache: through any sequence of leases added,
// removed and reordered, and units moved between them (onto leases that
// are gone, or never were, too), partLease answers as a map from lease ID
// built afresh over State.Leases does, and the lease-ID index is that map.
func TestPropertyResolveCache(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := &State{}
		next := 0
		var units []*Unit
		for i := 0; i < 6; i++ {
			units = append(units, &Unit{})
		}
		var gone []*Lease
		for step, n := 0, rapid.IntRange(1, 80).Draw(t, "steps"); step < n; step++ {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // rent
				next++
				st.Leases = append(st.Leases, &Lease{})
				st.Leases[len(st.Leases)-1].ID = fmt.Sprintf("L%d", next)
			case 1: // a lease ends and is pruned
				if len(st.Leases) > 0 {
					i := rapid.IntRange(0, len(st.Leases)-1).Draw(t, "drop")
					gone = append(gone, st.Leases[i])
					st.Leases = append(st.Leases[:i:i], st.Leases[i+1:]...)
				}
			case 2: // reorder
				if len(st.Leases) > 1 {
					i, j := rapid.IntRange(0, len(st.Leases)-1).Draw(t, "i"), rapid.IntRange(0, len(st.Leases)-1).Draw(t, "j")
					st.Leases[i], st.Leases[j] = st.Leases[j], st.Leases[i]
				}
			case 3: // a pruned lease comes back (a state reloaded)
				if len(gone) > 0 {
					l := gone[rapid.IntRange(0, len(gone)-1).Draw(t, "back")]
					found := false
					for _, x := range st.Leases {
						found = found || x.ID == l.ID
					}
					if !found {
						st.Leases = append(st.Leases, l)
					}
				}
			default: // a unit starts, stops or moves (a part's ID edited in place, too)
				u := units[rapid.IntRange(0, len(units)-1).Draw(t, "unit")]
				k := rapid.IntRange(0, 3).Draw(t, "parts")
				id := func() string { return fmt.Sprintf("L%d", rapid.IntRange(0, next+1).Draw(t, "to")) }
				if k > 0 && len(u.Parts) == k && rapid.Bool().Draw(t, "inPlace") {
					u.Parts[rapid.IntRange(0, k-1).Draw(t, "p")].LeaseID = id()
					break
				}
				u.Parts = nil
				for p := 0; p < k; p++ {
					u.Parts = append(u.Parts, Assigned{LeaseID: id()})
				}
			}
			fresh := map[string]*Lease{}
			for _, l := range st.Leases {
				fresh[l.ID] = l
			}
			gen := st.stampLeases()
			for ui, u := range units {
				for i := range u.Parts {
					if got, want := st.partLease(u, i, gen), fresh[u.Parts[i].LeaseID]; got != want {
						t.Fatalf("step %d: unit %d part %d on %s: cached %p, fresh %p", step, ui, i, u.Parts[i].LeaseID, got, want)
					}
				}
			}
			ix := st.leaseIndex()
			if len(ix) != len(fresh) {
				t.Fatalf("step %d: index has %d leases, want %d", step, len(ix), len(fresh))
			}
			for id, l := range fresh {
				if ix[id] != l {
					t.Fatalf("step %d: index maps %s wrongly", step, id)
				}
			}
		}
	})
}
