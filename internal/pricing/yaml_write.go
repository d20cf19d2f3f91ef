package pricing

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/core"
)

// WriteYAML writes c in the canonical YAML form. It validates c first, so
// that what it writes ParseYAML reads back as the same catalog.
func WriteYAML(w io.Writer, c *Catalog) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("write catalog: %w", err)
	}
	root := mapping(false,
		"currency", str(string(c.Currency)),
	)
	offers := seqNode(false)
	for i := range c.Offers {
		offers.Content = append(offers.Content, offerNode(&c.Offers[i]))
	}
	root.Content = append(root.Content, str("offers"), offers)
	if len(c.Vouchers) > 0 {
		vs := seqNode(false)
		for i := range c.Vouchers {
			vs.Content = append(vs.Content, voucherNode(&c.Vouchers[i]))
		}
		root.Content = append(root.Content, str("vouchers"), vs)
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root},
		HeadComment: "gpufleet price catalog; the schema is in docs/catalog.md"}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write catalog: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("write catalog: %w", err)
	}
	return nil
}

func offerNode(o *core.Offer) *yaml.Node {
	n := mapping(false, "id", str(o.ID), "provider", str(o.Provider))
	add(n, o.Region != "", "region", str(o.Region))
	add(n, o.InstanceType != "", "instance_type", str(o.InstanceType))
	add(n, true, "gpu_model", str(o.GPUModel))
	add(n, true, "gpus", num(FormatGPUCount(o)))
	add(n, o.GPUMemMiB != 0, "gpu_memory_gib", num(formatMiBAsGiB(o.GPUMemMiB)))
	add(n, o.VCPUs != 0, "vcpus", num(strconv.Itoa(o.VCPUs)))
	add(n, o.MemoryMiB != 0, "memory_gib", num(formatMiBAsGiB(o.MemoryMiB)))
	a, c := writtenHardware(o)
	add(n, a != "", "accelerator", str(string(a)))
	add(n, c != "", "capability", str(string(c)))
	plans := seqNode(false)
	for i := range o.Plans {
		plans.Content = append(plans.Content, planNode(&o.Plans[i]))
	}
	add(n, true, "plans", plans)
	return n
}

func planNode(p *core.PricePlan) *yaml.Node {
	n := mapping(false,
		"mode", str(string(p.Mode)),
		"price", num(p.Price.String()),
		"per", str(string(p.Per)),
	)
	add(n, p.Term != 0, "term", str(formatSpan(p.Term)))
	add(n, true, "granularity", str(formatSpan(p.Granularity)))
	add(n, p.MinCharge != 0, "min_charge", str(formatSpan(p.MinCharge)))
	if et := p.EarlyTermination; et != nil {
		e := mapping(true, "granularity", str(formatSpan(et.Granularity)))
		add(e, et.Fee != 0, "fee", num(et.Fee.String()))
		add(n, true, "early_termination", e)
	}
	if len(p.Series) > 0 {
		s := seqNode(false)
		for _, pt := range p.Series {
			s.Content = append(s.Content, mapping(true, "at", str(pt.At.Format(time.RFC3339Nano)), "price", num(pt.Price.String())))
		}
		add(n, true, "series", s)
	}
	if r := p.Reclaim; r != nil {
		rn := mapping(true)
		add(rn, r.Bucket != "", "bucket", str(r.Bucket))
		add(rn, true, "monthly_rate", str(formatPercentBP(r.MonthlyRateBP)))
		add(rn, r.NoticeSeconds != 0, "notice", str(formatSpan(r.NoticeSeconds)))
		add(n, true, "reclaim", rn)
	}
	if t := p.TimeOfUse; t != nil {
		ws := seqNode(false)
		for _, w := range t.Windows {
			ws.Content = append(ws.Content, mapping(true,
				"weekdays", weekdaysNode(w.Weekdays),
				"start", num(strconv.Itoa(w.StartHour)),
				"end", num(strconv.Itoa(w.EndHour)),
				"multiplier", num(formatFactorBP(w.MultiplierBP)),
			))
		}
		add(n, true, "time_of_use", mapping(false, "timezone", str(t.Location.String()), "windows", ws))
	}
	return n
}

// weekdaysNode writes weekdays as "all", a range such as "mon-fri", or a
// list, whichever reads back as the same days in the same order.
func weekdaysNode(days []time.Weekday) *yaml.Node {
	run := len(days) >= 2
	for i := 1; i < len(days) && run; i++ {
		run = days[i] == (days[i-1]+1)%7
	}
	if run {
		if len(days) == 7 && days[0] == time.Monday {
			return str("all")
		}
		return str(dayName(days[0]) + "-" + dayName(days[len(days)-1]))
	}
	s := seqNode(true)
	for _, d := range days {
		s.Content = append(s.Content, str(dayName(d)))
	}
	return s
}

func voucherNode(v *core.Voucher) *yaml.Node {
	n := mapping(false,
		"id", str(v.ID),
		"share", str(formatPercentBP(v.ShareBP)),
		"cap", num(v.Cap.String()),
		"valid_from", str(formatTime(v.ValidFrom)),
		"valid_to", str(formatTime(v.ValidTo)),
	)
	add(n, len(v.Providers) > 0, "providers", strList(v.Providers))
	add(n, len(v.GPUModels) > 0, "gpu_models", strList(v.GPUModels))
	modes := make([]string, len(v.Modes))
	for i, m := range v.Modes {
		modes[i] = string(m)
	}
	add(n, len(v.Modes) > 0, "modes", strList(modes))
	return n
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// num is a plain scalar: the encoder writes it unquoted, and ParseYAML
// reads its text, so a number never becomes a float.
func num(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

func strList(items []string) *yaml.Node {
	s := seqNode(true)
	for _, it := range items {
		s.Content = append(s.Content, str(it))
	}
	return s
}

func seqNode(flow bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	return n
}

func mapping(flow bool, kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if flow {
		n.Style = yaml.FlowStyle
	}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, str(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}

func add(n *yaml.Node, ok bool, key string, v *yaml.Node) {
	if ok {
		n.Content = append(n.Content, str(key), v)
	}
}
