package ssh

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// SMIQuery is the nvidia-smi command the provider runs on a host to read
// its GPUs; ParseSMI reads its output.
const SMIQuery = "nvidia-smi --query-gpu=index,name,memory.total,uuid --format=csv,noheader,nounits"

// GPU is one GPU of a host as nvidia-smi reports it.
type GPU struct {
	Index  int
	Name   string
	MemMiB int64
	UUID   string
}

// ErrNoGPU is wrapped when a host has no GPU to rent: no nvidia-smi, or
// one that lists none.
var ErrNoGPU = errors.New("ssh provider: no GPU")

// ParseSMI parses SMIQuery's output: one line per GPU, "index, name,
// memory.total (MiB), uuid". A name may itself hold commas, so the
// fields are taken from both ends. Blank lines are skipped; any other
// line that does not parse is an error naming its line number.
func ParseSMI(out string) ([]GPU, error) {
	var gpus []GPU
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 4 {
			return nil, fmt.Errorf("nvidia-smi line %d: %q: want 4 fields (index, name, memory.total, uuid)", i+1, line)
		}
		for j := range f {
			f[j] = strings.TrimSpace(f[j])
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("nvidia-smi line %d: index %q: want an integer >= 0", i+1, f[0])
		}
		memField := f[len(f)-2]
		mem, err := strconv.ParseInt(memField, 10, 64)
		if err != nil || mem <= 0 {
			return nil, fmt.Errorf("nvidia-smi line %d: memory.total %q: want MiB > 0 (is the driver loaded?)", i+1, memField)
		}
		name := strings.Join(f[1:len(f)-2], ",")
		if name == "" {
			return nil, fmt.Errorf("nvidia-smi line %d: empty GPU name", i+1)
		}
		gpus = append(gpus, GPU{Index: idx, Name: name, MemMiB: mem, UUID: f[len(f)-1]})
	}
	return gpus, nil
}

// modelKey is a GPU model's name for matching: lower case, without
// spaces, dashes and the vendor ("NVIDIA H100 80GB HBM3" → "h10080gbhbm3").
func modelKey(s string) string {
	s = strings.ToLower(s)
	for _, cut := range []string{"nvidia", "tesla", "geforce", " ", "-", "_"} {
		s = strings.ReplaceAll(s, cut, "")
	}
	return s
}

// modelMatches reports whether nvidia-smi's name is the catalog's model:
// the catalog's words ("NVIDIA H100", "NVIDIA T4 Tensor Core") are
// looser than the driver's ("NVIDIA H100 80GB HBM3", "Tesla T4"), so
// one key must start the other's.
func modelMatches(smiName, catalogModel string) bool {
	a, b := modelKey(smiName), modelKey(catalogModel)
	if a == "" || b == "" {
		return false
	}
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}

// CheckOffer says whether the GPUs a host reported are the offer's:
// as many, of its model.
func CheckOffer(gpus []GPU, o *core.Offer) error {
	if len(gpus) == 0 {
		return ErrNoGPU
	}
	if len(gpus) != o.GPUs {
		return fmt.Errorf("the host has %d GPUs, offer %s has %d", len(gpus), o.ID, o.GPUs)
	}
	for _, g := range gpus {
		if !modelMatches(g.Name, o.GPUModel) {
			return fmt.Errorf("GPU %d is a %s, offer %s is %s", g.Index, g.Name, o.ID, o.GPUModel)
		}
	}
	return nil
}

// MatchOffer returns the one offer among offers whose GPUs are gpus. None
// or several is an error that says which; a host that could be several
// offers must name its offer in the config.
func MatchOffer(gpus []GPU, offers []core.Offer) (string, error) {
	if len(gpus) == 0 {
		return "", ErrNoGPU
	}
	var ids []string
	for i := range offers {
		if offers[i].SliceMilli == 0 && CheckOffer(gpus, &offers[i]) == nil {
			ids = append(ids, offers[i].ID)
		}
	}
	slices.Sort(ids)
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no offer of the catalog has %d × %s (set the host's offer:)", len(gpus), gpus[0].Name)
	case 1:
		return ids[0], nil
	default:
		return "", fmt.Errorf("%d × %s is any of the offers %s (set the host's offer:)", len(gpus), gpus[0].Name, strings.Join(ids, ", "))
	}
}
