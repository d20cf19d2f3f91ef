package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/spf13/cobra"
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

// basePolicy is gpufleet's default policy holding portfolio p's
// committed base: its GPUs per model, on the committed mode of the
// longest term in the base's mix (the fleet keeps a base on one mode:
// where classes differ, the mode of the most GPUs, the longer term on a
// tie). The doc says what the plan chose, term by term.
func basePolicy(p plan.Portfolio, offers []core.Offer) (policy.Policy, error) {
	pol := policy.Default()
	pol.Name, pol.Source = "portfolio-base", "gpufleet plan portfolio"
	gpusIn := map[core.BillingMode]int64{}
	var notes []string
	for _, r := range p.Reserved {
		if r.Count <= 0 {
			continue
		}
		mode, err := baseMode(p, r.GPUModel, offers)
		if err != nil {
			return policy.Policy{}, err
		}
		pol.Reserved.GPUs[r.GPUModel] = int(min(r.Count, 1_000_000))
		gpusIn[mode] += r.Count
		notes = append(notes, fmt.Sprintf("%d %s GPUs on %s", r.Count, r.GPUModel, r.Term))
	}
	best := core.Monthly
	for _, m := range []core.BillingMode{core.Monthly, core.Weekly, core.Daily} { // longest first: it wins ties
		if gpusIn[m] > gpusIn[best] {
			best = m
		}
	}
	pol.Reserved.Mode = best
	pol.Doc = fmt.Sprintf("gpufleet's default policy with the committed base gpufleet plan portfolio chose for %d hours from %s: %s",
		p.Hours, p.Start.UTC().Format(time.RFC3339), strings.Join(append(notes, "nothing reserved")[:max(len(notes), 1)], "; "))
	return pol, pol.Validate()
}

// baseMode is the committed mode of the longest term in model's base.
func baseMode(p plan.Portfolio, model string, offers []core.Offer) (core.BillingMode, error) {
	for _, c := range p.Classes {
		if c.GPUModel != model || !c.HasBase {
			continue
		}
		var longest int64
		for _, pc := range c.Base.Periods {
			if pc.Count > 0 || pc.PartialSeconds > 0 {
				longest = max(longest, pc.Seconds)
			}
		}
		for i := range offers {
			o := &offers[i]
			if o.GPUModel != model {
				continue
			}
			for _, pl := range o.Plans {
				if term := committedTerm(pl); term > 0 && term == longest {
					return pl.Mode, nil
				}
			}
		}
		return "", fmt.Errorf("plan portfolio: %s: the base's longest term (%d s) is no committed plan of the catalog", model, longest)
	}
	return "", fmt.Errorf("plan portfolio: %s: no committed base planned", model)
}

// committedTerm is a committed plan's term in seconds as the planner
// reads it (plan.PricesFromOffer); 0 for pay-as-you-go and spot.
func committedTerm(pl core.PricePlan) int64 {
	if pl.Term > 0 {
		return pl.Term
	}
	switch pl.Mode {
	case core.Daily:
		return core.Day.Seconds()
	case core.Weekly:
		return core.Week.Seconds()
	case core.Monthly:
		return core.Month.Seconds()
	}
	return 0
}

// writePolicyOut writes portfolio p's base as a policy file at path.
func writePolicyOut(cmd *cobra.Command, path string, p plan.Portfolio, offers []core.Offer) error {
	pol, err := basePolicy(p, offers)
	if err != nil {
		return err
	}
	b, err := policy.Marshal(pol)
	if err != nil {
		return err
	}
	return writeTo(cmd, path, func(w io.Writer) error {
		_, err := w.Write(append([]byte("# gpufleet policy file (docs/policy.md), written by gpufleet plan portfolio\n"), b...))
		return err
	})
}
