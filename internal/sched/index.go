package sched

import (
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// index finds candidate GPUs without scanning every node: nodes are
// bucketed per GPU model by how many empty GPUs they have, and partly
// used shared GPUs by their free milli-share. Finding room for a unit
// walks buckets from the tightest fit upwards (best fit), so placement
// costs about the number of candidates looked at, not the fleet size.
type index struct {
	nodes  []core.Node
	models map[string]int
	// whole[m][c] lists nodes of model m with c empty GPUs.
	whole [][][]int32
	// partial[m][v] lists shared GPUs of model m with v free milli
	// (1..999), as refs node*maxGPUs+gpu. partial[m] stays nil until a
	// GPU of model m is partly used: most steps share no GPU, and a
	// thousand empty buckets per model per step were most of the
	// index's allocations.
	partial [][][]int32
	nodeC   []int // bucket of each node
	nodePos []int
	// nodeModel is each node's model id: update and updateGPU run for
	// every GPU of every node at each fill, and a map lookup by model
	// name there was most of the index's cost.
	nodeModel []int
	gpuFree   []int16 // bucket of each GPU ref; 0: not partly used
	gpuPos    []int
	maxGPUs   int
	modelIDs  []string
	// shapes holds, per distinct hardware among the nodes, the most GPUs
	// a node of it has: what a unit that needs one node may hope for.
	shapes MachineShapes
	// pool, when set, lends bucket arrays kept from earlier calls.
	pool *placerScratch
}

func (ix *index) ref(node, gpu int) int32 { return int32(node*ix.maxGPUs + gpu) }

func (ix *index) unref(r int32) (node, gpu int) { return int(r) / ix.maxGPUs, int(r) % ix.maxGPUs }

func newIndex(nodes []core.Node) *index {
	ix := &index{nodes: nodes, models: map[string]int{}, nodeC: make([]int, len(nodes)), nodePos: make([]int, len(nodes)), nodeModel: make([]int, len(nodes))}
	for i := range nodes {
		ix.maxGPUs = max(ix.maxGPUs, len(nodes[i].GPUs))
	}
	ix.maxGPUs = max(ix.maxGPUs, 1)
	ix.gpuFree = make([]int16, len(nodes)*ix.maxGPUs)
	ix.gpuPos = make([]int, len(nodes)*ix.maxGPUs)
	ix.fill()
	return ix
}

// fill buckets every node and GPU of a fresh index.
func (ix *index) fill() {
	nodes := ix.nodes
	m, last := -1, ""
	s := -1
	for i := range nodes {
		// Neighbouring nodes are mostly of one model: look the name up
		// only when it changes.
		if m < 0 || nodes[i].GPUModel != last {
			m, last = ix.model(nodes[i].GPUModel), nodes[i].GPUModel
		}
		ix.nodeModel[i] = m
		// And of one hardware: look its shape up only when it changes.
		if s < 0 || !sameHardware(&nodes[i], &nodes[i-1]) {
			s = ix.shape(nodes[i].Hardware())
		}
		ix.shapes[s].GPUs = max(ix.shapes[s].GPUs, len(nodes[i].GPUs))
		c := freeWhole(&nodes[i])
		ix.nodeC[i] = c
		ix.nodePos[i] = len(ix.whole[m][c])
		ix.whole[m][c] = append(ix.whole[m][c], int32(i))
		for g := range nodes[i].GPUs {
			if gp := &nodes[i].GPUs[g]; gp.Shared {
				ix.updateGPU(i, g) // a fresh index holds only partly used shared GPUs
			}
		}
	}
}

// shape returns the index of hw in ix.shapes, adding it.
func (ix *index) shape(hw core.Hardware) int {
	s := slices.IndexFunc(ix.shapes, func(sh MachineShape) bool { return sh.Hardware == hw })
	if s < 0 {
		s = len(ix.shapes)
		ix.shapes = append(ix.shapes, MachineShape{Hardware: hw})
	}
	return s
}

// sameHardware reports whether nodes a and b have the same hardware
// (core.Node.Hardware), without building it.
func sameHardware(a, b *core.Node) bool {
	return a.GPUModel == b.GPUModel && a.GPUMemMiB == b.GPUMemMiB && a.SliceMilli == b.SliceMilli &&
		a.Accelerator == b.Accelerator && a.Capability == b.Capability
}

func (ix *index) model(name string) int {
	m, ok := ix.models[name]
	if !ok {
		m = len(ix.modelIDs)
		ix.models[name] = m
		ix.modelIDs = append(ix.modelIDs, name)
		ix.whole = append(ix.whole, ix.wholeBuckets(m))
		ix.partial = append(ix.partial, nil)
	}
	return m
}

// update re-buckets node i and its GPUs after its free capacity changed.
func (ix *index) update(i int) {
	n := &ix.nodes[i]
	m := ix.nodeModel[i]
	if c := freeWhole(n); c != ix.nodeC[i] {
		ix.whole[m][ix.nodeC[i]] = removeAt(ix.whole[m][ix.nodeC[i]], ix.nodePos[i], ix.nodePos)
		ix.nodeC[i] = c
		ix.nodePos[i] = len(ix.whole[m][c])
		ix.whole[m][c] = append(ix.whole[m][c], int32(i))
	}
	for g := range n.GPUs {
		ix.updateGPU(i, g)
	}
}

func (ix *index) updateGPU(i, g int) {
	n := &ix.nodes[i]
	m := ix.nodeModel[i]
	ref := ix.ref(i, g)
	v := int(n.GPUs[g].FreeMilli)
	if !n.GPUs[g].Shared || v <= 0 || v >= int(core.WholeGPU) {
		v = 0 // not a partly used shared GPU
	}
	old := int(ix.gpuFree[ref])
	if old == v {
		return
	}
	if old > 0 {
		ix.partial[m][old] = removeAt(ix.partial[m][old], ix.gpuPos[ref], ix.gpuPos)
	}
	ix.gpuFree[ref] = int16(v)
	if v > 0 {
		if ix.partial[m] == nil {
			ix.partial[m] = ix.partialBuckets(m)
		}
		ix.gpuPos[ref] = len(ix.partial[m][v])
		ix.partial[m][v] = append(ix.partial[m][v], ref)
	}
}

// removeAt swap-deletes position p of a bucket, fixing the position of
// the entry moved into its place.
func removeAt(b []int32, p int, pos []int) []int32 {
	last := len(b) - 1
	if p != last {
		b[p] = b[last]
		pos[b[p]] = p
	}
	return b[:last]
}

// allowedModels returns the index's model ids a request may use.
func (ix *index) allowedModels(r *core.Request, buf []int) []int {
	buf = buf[:0]
	if len(r.Models) == 0 {
		for m := range ix.modelIDs {
			buf = append(buf, m)
		}
		return buf
	}
	for _, name := range r.Models {
		if m, ok := ix.models[name]; ok {
			buf = append(buf, m)
		}
	}
	return buf
}
