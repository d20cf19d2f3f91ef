package fleet

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// PoolOffers narrows offers to those a pool of machines has (count: how
// many machines of each offer id), with the pool's counts as their
// capacity: what Feasible judges a job against when machines cannot be
// rented, only leased from the pool (the static provider).
func PoolOffers(offers []core.Offer, count map[string]int) ([]core.Offer, Capacity) {
	var out []core.Offer
	for _, o := range offers {
		if count[o.ID] > 0 {
			out = append(out, o)
		}
	}
	return out, func(id string) int { return count[id] }
}

// PoolSummary names a pool's offers and their machines' GPUs, for a
// reason.
func PoolSummary(offers []core.Offer) string {
	names := make([]string, 0, len(offers))
	for _, o := range offers {
		names = append(names, fmt.Sprintf("%s: %d × %s", o.ID, o.GPUs, o.GPUModel))
	}
	sort.Strings(names)
	return "machines of " + strings.Join(names, ", ")
}
