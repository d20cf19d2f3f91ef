package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/policy"
)

// loadPolicy reads a policy file (docs/policy.md).
func loadPolicy(path string) (policy.Policy, error) {
	fh, err := os.Open(path)
	if err != nil {
		return policy.Policy{}, fmt.Errorf("load policy: %w", err)
	}
	defer fh.Close()
	// One byte past the limit, so that Parse sees a file too large.
	data, err := io.ReadAll(io.LimitReader(fh, policy.MaxFileBytes+1))
	if err != nil {
		return policy.Policy{}, fmt.Errorf("load policy %s: %w", path, err)
	}
	return policy.Parse(path, data)
}

// isPolicyFile says whether a --policy item names a file rather than a
// preset: a .yaml or .yml name.
func isPolicyFile(s string) bool {
	ext := strings.ToLower(filepath.Ext(s))
	return ext == ".yaml" || ext == ".yml"
}

// resolvePolicies reads sim's --policy: comma-separated preset names and
// policy files, run side by side. Two policies may not share a name: the
// reports tell them apart by it.
func resolvePolicies(list string) ([]policy.Policy, error) {
	var out []policy.Policy
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		var p policy.Policy
		var err error
		switch {
		case isPolicyFile(item):
			if p, err = loadPolicy(item); err != nil {
				return nil, err
			}
		case slices.Contains(policy.PresetNames, item):
			p, _ = policy.Preset(item)
		default:
			return nil, usageError{&core.FieldError{Field: "--policy", Value: item, Allowed: "comma-separated presets (" + strings.Join(policy.PresetNames, ", ") + ") and policy files (.yaml)"}}
		}
		if i := slices.IndexFunc(out, func(q policy.Policy) bool { return q.Name == p.Name }); i >= 0 {
			return nil, usageError{&core.FieldError{Field: "--policy", Value: item, Allowed: fmt.Sprintf("policies with different names (%s is also the name of %s)", p.Name, out[i].Source)}}
		}
		out = append(out, p)
	}
	return out, nil
}
