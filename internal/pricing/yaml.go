package pricing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Load reads a catalog file, by its extension: .yaml or .yml is the
// canonical YAML form, .csv the canonical CSV form. Use ImportAWS for the
// AWS price list.
func Load(path string) (*Catalog, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".yaml" && ext != ".yml" && ext != ".csv" {
		return nil, fmt.Errorf("load catalog %s: unknown extension %q: want .yaml, .yml or .csv", path, ext)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load catalog: %w", err)
	}
	if ext == ".csv" {
		return ReadCSV(path, bytes.NewReader(data))
	}
	return ParseYAML(path, data)
}

// yamlBudget bounds the values visited in reading a file, aliases
// expanded: ten per byte of input, which no file without aliases reaches
// and which leaves room for aliases that repeat a block, but cuts a
// "billion laughs" short.
func yamlBudget(size int) int { return 100_000 + 10*size }

// ParseYAML reads a catalog in the canonical YAML form (docs/catalog.md)
// and validates it. name is the file name used in errors. Unknown keys are
// errors; money is read from the scalar's text, never through a float.
// Every error is a *ParseError with the line, the field path and the value.
func ParseYAML(name string, data []byte) (*Catalog, error) {
	d := &ydec{file: name, pos: map[string]ypos{}, budget: yamlBudget(len(data))}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{File: name, Problem: "empty file", Allowed: "a catalog with currency and offers (docs/catalog.md)"}
		}
		return nil, d.syntax(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, d.syntax(err)
		}
		return nil, &ParseError{File: name, Line: extra.Line, Problem: "a second YAML document", Allowed: "one catalog per file"}
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, &ParseError{File: name, Problem: "empty file", Allowed: "a catalog with currency and offers (docs/catalog.md)"}
		}
		root = doc.Content[0]
	}
	c, err := d.catalog(root)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, d.locate(err)
	}
	return c, nil
}

// ydec walks a YAML node tree, recording where each field was.
type ydec struct {
	file   string
	pos    map[string]ypos
	budget int
}

type ypos struct {
	line   int
	raw    string
	scalar bool
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *ydec) syntax(err error) error {
	msg := err.Error()
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &ParseError{File: d.file, Line: line, Problem: "YAML syntax error: " + m[2], Err: err}
	}
	return &ParseError{File: d.file, Problem: "YAML syntax error: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
}

// locate turns a Validate error into a ParseError at the field's line,
// with the value as written.
func (d *ydec) locate(err error) error {
	var fe *core.FieldError
	if !errors.As(err, &fe) {
		return fmt.Errorf("%s: %w", d.file, err)
	}
	pe := &ParseError{File: d.file, Field: fe.Field, Value: fe.Value, Allowed: fe.Allowed, Err: err}
	if p, ok := d.pos[fe.Field]; ok && p.scalar {
		pe.Line, pe.Value = p.line, p.raw
		return pe
	}
	for f := fe.Field; f != ""; f = parentPath(f) {
		if p, ok := d.pos[f]; ok {
			pe.Line = p.line
			break
		}
	}
	if pe.Value == "" {
		pe.Problem = "missing"
	}
	return pe
}

// parentPath drops the last step of a field path: a.b[2].c → a.b[2] →
// a.b → a.
func parentPath(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *ydec) resolve(n *yaml.Node, path string) (*yaml.Node, error) {
	for i := 0; n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 64 {
			return nil, &ParseError{File: d.file, Line: n.Line, Field: path, Problem: "an unresolvable alias", Allowed: "an alias of an anchor defined earlier"}
		}
		n = n.Alias
	}
	d.budget--
	if d.budget < 0 {
		return nil, &ParseError{File: d.file, Line: n.Line, Field: path, Problem: "too many values after expanding aliases", Allowed: "fewer repetitions through aliases"}
	}
	return n, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "something else"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// ymap is one YAML mapping with its keys checked.
type ymap struct {
	d    *ydec
	node *yaml.Node
	path string
	vals map[string]*yaml.Node
}

// mapping checks that n is a mapping whose keys are all in allowed, each
// once.
func (d *ydec) mapping(n *yaml.Node, path string, allowed []string, what string) (*ymap, error) {
	n, err := d.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, &ParseError{File: d.file, Line: n.Line, Field: path, Problem: "got " + kindName(n), Allowed: what + ": a mapping with keys " + strings.Join(allowed, ", ")}
	}
	d.pos[path] = ypos{line: n.Line}
	m := &ymap{d: d, node: n, path: path, vals: map[string]*yaml.Node{}}
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := d.resolve(n.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, &ParseError{File: d.file, Line: k.Line, Field: path, Problem: "a key that is " + kindName(k), Allowed: "keys " + strings.Join(allowed, ", ")}
		}
		key := k.Value
		if !slices.Contains(allowed, key) {
			hint := ""
			if near := nearest(key, allowed, 1); len(near) > 0 {
				hint = " (did you mean " + near[0] + "?)"
			}
			return nil, &ParseError{File: d.file, Line: k.Line, Field: path, Problem: "unknown key", Value: key, Allowed: "one of " + strings.Join(allowed, ", ") + hint}
		}
		if l, dup := lines[key]; dup {
			return nil, &ParseError{File: d.file, Line: k.Line, Field: path, Problem: "duplicate key", Value: key, Allowed: fmt.Sprintf("each key once (first at line %d)", l)}
		}
		lines[key] = k.Line
		v := n.Content[i+1]
		if !isNull(v) {
			m.vals[key] = v
		}
	}
	return m, nil
}

func (m *ymap) has(key string) bool { return m.vals[key] != nil }

// missing is the error for a required key that is absent.
func (m *ymap) missing(key, allowed string) error {
	return &ParseError{File: m.d.file, Line: m.node.Line, Field: join(m.path, key), Problem: "missing", Allowed: allowed}
}

// scalar returns the text of key's value, or ok=false if it is absent.
func (m *ymap) scalar(key, allowed string) (text string, line int, ok bool, err error) {
	v := m.vals[key]
	if v == nil {
		return "", 0, false, nil
	}
	field := join(m.path, key)
	v, err = m.d.resolve(v, field)
	if err != nil {
		return "", 0, false, err
	}
	if isNull(v) {
		return "", 0, false, nil
	}
	if v.Kind != yaml.ScalarNode {
		return "", 0, false, &ParseError{File: m.d.file, Line: v.Line, Field: field, Problem: "got " + kindName(v), Allowed: allowed}
	}
	switch v.ShortTag() {
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
	default:
		return "", 0, false, &ParseError{File: m.d.file, Line: v.Line, Field: field, Value: v.Value, Problem: "a value tagged " + v.Tag, Allowed: allowed}
	}
	m.d.pos[field] = ypos{line: v.Line, raw: v.Value, scalar: true}
	return v.Value, v.Line, true, nil
}

func (m *ymap) bad(key string, line int, value, allowed string, err error) error {
	return &ParseError{File: m.d.file, Line: line, Field: join(m.path, key), Value: value, Allowed: allowed, Err: err}
}

// str returns a string value ("" if absent).
func (m *ymap) str(key, allowed string, required bool) (string, error) {
	s, _, ok, err := m.scalar(key, allowed)
	if err != nil {
		return "", err
	}
	if !ok && required {
		return "", m.missing(key, allowed)
	}
	return s, nil
}

// money returns an amount parsed with core.ParseMicros.
func (m *ymap) money(key, allowed string, required bool) (core.Micros, bool, error) {
	s, line, ok, err := m.scalar(key, allowed)
	if err != nil || !ok {
		if err == nil && required {
			err = m.missing(key, allowed)
		}
		return 0, false, err
	}
	v, err := core.ParseMicros(s)
	if err != nil {
		return 0, false, m.bad(key, line, s, allowed+" (a decimal number with at most 13 digits before the point)", err)
	}
	return v, true, nil
}

// integer returns a whole number.
func (m *ymap) integer(key, allowed string, required bool) (int64, error) {
	s, line, ok, err := m.scalar(key, allowed)
	if err != nil || !ok {
		if err == nil && required {
			err = m.missing(key, allowed)
		}
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, m.bad(key, line, s, allowed, err)
	}
	return v, nil
}

const spanAllowed = `a length of time: a period name (hour), a count of periods (3 months), a Go duration (90s) or whole seconds`

// span returns a length of time in seconds (core.ParseSpan; "0" is zero
// when zeroOK).
func (m *ymap) span(key string, zeroOK, required bool) (int64, bool, error) {
	allowed := spanAllowed
	if zeroOK {
		allowed += ", or 0"
	}
	s, line, ok, err := m.scalar(key, allowed)
	if err != nil || !ok {
		if err == nil && required {
			err = m.missing(key, allowed)
		}
		return 0, false, err
	}
	parse := core.ParseSpan
	if zeroOK {
		parse = parseSpanOrZero
	}
	v, err := parse(s)
	if err != nil {
		return 0, false, m.bad(key, line, s, allowed, err)
	}
	return v, true, nil
}

// gib returns a size in GiB as whole MiB.
func (m *ymap) gib(key, allowed string) (int64, error) {
	s, line, ok, err := m.scalar(key, allowed)
	if err != nil || !ok {
		return 0, err
	}
	v, ok := parseGiBToMiB(s)
	if !ok {
		return 0, m.bad(key, line, s, allowed, nil)
	}
	return v, nil
}

// when returns a time written as RFC 3339 or as a date (midnight UTC).
func (m *ymap) when(key string, required bool) (time.Time, error) {
	const allowed = "an RFC 3339 time such as 2026-01-01T00:00:00Z, or a date such as 2026-01-01 (midnight UTC)"
	s, line, ok, err := m.scalar(key, allowed)
	if err != nil || !ok {
		if err == nil && required {
			err = m.missing(key, allowed)
		}
		return time.Time{}, err
	}
	t, err := parseTime(s)
	if err != nil {
		return time.Time{}, m.bad(key, line, s, allowed, err)
	}
	return t, nil
}

func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) == len("2006-01-02") {
		return time.Parse(time.DateOnly, s)
	}
	return time.Parse(time.RFC3339Nano, s)
}

// formatTime writes t as parseTime reads it: a date for midnight UTC,
// otherwise RFC 3339 in t's own zone.
func formatTime(t time.Time) string {
	if t.Location() == time.UTC && t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0 {
		return t.Format(time.DateOnly)
	}
	return t.Format(time.RFC3339Nano)
}

// list returns the items of a sequence (a single scalar is a one-item list).
func (m *ymap) list(key, allowed string) ([]*yaml.Node, string, error) {
	v := m.vals[key]
	field := join(m.path, key)
	if v == nil {
		return nil, field, nil
	}
	v, err := m.d.resolve(v, field)
	if err != nil {
		return nil, field, err
	}
	m.d.pos[field] = ypos{line: v.Line}
	switch v.Kind {
	case yaml.SequenceNode:
		return v.Content, field, nil
	case yaml.ScalarNode:
		return []*yaml.Node{v}, field, nil
	}
	return nil, field, &ParseError{File: m.d.file, Line: v.Line, Field: field, Problem: "got " + kindName(v), Allowed: allowed}
}

// seq returns a sequence's items; anything else is refused, so that a
// missing "-" is caught.
func (m *ymap) seq(key, allowed string) ([]*yaml.Node, string, error) {
	v := m.vals[key]
	field := join(m.path, key)
	if v == nil {
		return nil, field, nil
	}
	v, err := m.d.resolve(v, field)
	if err != nil {
		return nil, field, err
	}
	m.d.pos[field] = ypos{line: v.Line}
	if v.Kind != yaml.SequenceNode {
		return nil, field, &ParseError{File: m.d.file, Line: v.Line, Field: field, Problem: "got " + kindName(v), Allowed: allowed}
	}
	return v.Content, field, nil
}

// stringList returns a list of scalars (a single scalar is a one-item
// list).
func (m *ymap) stringList(key, allowed string) ([]string, error) {
	items, field, err := m.list(key, allowed)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		it, err := m.d.resolve(it, f)
		if err != nil {
			return nil, err
		}
		if it.Kind != yaml.ScalarNode || isNull(it) {
			return nil, &ParseError{File: m.d.file, Line: it.Line, Field: f, Problem: "got " + kindName(it), Allowed: allowed}
		}
		m.d.pos[f] = ypos{line: it.Line, raw: it.Value, scalar: true}
		out = append(out, it.Value)
	}
	return out, nil
}

var (
	catalogKeys  = []string{"currency", "offers", "vouchers"}
	offerKeys    = []string{"id", "provider", "region", "instance_type", "gpu_model", "gpus", "gpu_memory_gib", "vcpus", "memory_gib", "accelerator", "capability", "plans"}
	planKeys     = []string{"mode", "price", "per", "granularity", "min_charge", "term", "early_termination", "series", "reclaim", "time_of_use"}
	etKeys       = []string{"granularity", "fee"}
	pointKeys    = []string{"at", "price"}
	reclaimKeys  = []string{"bucket", "monthly_rate", "notice"}
	touKeys      = []string{"timezone", "windows"}
	windowKeys   = []string{"weekdays", "start", "end", "multiplier"}
	voucherKeys  = []string{"id", "share", "cap", "valid_from", "valid_to", "providers", "gpu_models", "modes"}
	priceAllowed = "a price >= 0, such as 21.958"
)

func (d *ydec) catalog(n *yaml.Node) (*Catalog, error) {
	m, err := d.mapping(n, "", catalogKeys, "a catalog")
	if err != nil {
		return nil, err
	}
	const curAllowed = "an ISO 4217 code such as USD, EUR, CNY"
	s, line, ok, err := m.scalar("currency", curAllowed)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, m.missing("currency", curAllowed)
	}
	cur, err := core.ParseCurrency(s)
	if err != nil {
		return nil, m.bad("currency", line, s, curAllowed, err)
	}
	c := &Catalog{Currency: cur}
	items, field, err := m.seq("offers", "a list of offers")
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		o, err := d.offer(it, fmt.Sprintf("%s[%d]", field, i), cur)
		if err != nil {
			return nil, err
		}
		c.Offers = append(c.Offers, o)
	}
	items, field, err = m.seq("vouchers", "a list of vouchers")
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		v, err := d.voucher(it, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		c.Vouchers = append(c.Vouchers, v)
	}
	return c, nil
}

func (d *ydec) offer(n *yaml.Node, path string, cur core.Currency) (core.Offer, error) {
	o := core.Offer{Currency: cur}
	m, err := d.mapping(n, path, offerKeys, "an offer")
	if err != nil {
		return o, err
	}
	if o.ID, err = m.str("id", "an offer id such as aws/us-east-1/p4d.24xlarge", false); err != nil {
		return o, err
	}
	if o.Provider, err = m.str("provider", "a provider name such as aws or idc-chengdu", true); err != nil {
		return o, err
	}
	if o.Region, err = m.str("region", "a region name", false); err != nil {
		return o, err
	}
	if o.InstanceType, err = m.str("instance_type", "a machine type name", false); err != nil {
		return o, err
	}
	if o.GPUModel, err = m.str("gpu_model", "a GPU model such as NVIDIA A100", true); err != nil {
		return o, err
	}
	s, l, ok, err := m.scalar("gpus", gpuCountAllowed)
	if err != nil {
		return o, err
	}
	if !ok {
		return o, m.missing("gpus", gpuCountAllowed)
	}
	if o.GPUs, o.SliceMilli, ok = parseGPUCount(s); !ok {
		return o, m.bad("gpus", l, s, gpuCountAllowed, nil)
	}
	if s, l, ok, err := m.scalar("accelerator", accelAllowed); err != nil {
		return o, err
	} else if ok {
		if o.Accelerator, err = core.ParseAccelerator("accelerator", s); err != nil {
			return o, m.bad("accelerator", l, s, accelAllowed, nil)
		}
	}
	if s, l, ok, err := m.scalar("capability", capAllowed); err != nil {
		return o, err
	} else if ok {
		if o.Capability, err = core.ParseWorkload("capability", s); err != nil {
			return o, m.bad("capability", l, s, capAllowed, nil)
		}
	}
	withGuessedHardware(&o)
	if o.GPUMemMiB, err = m.gib("gpu_memory_gib", "GiB of memory per GPU in whole MiB, such as 40 or 7.5"); err != nil {
		return o, err
	}
	vcpus, err := m.integer("vcpus", "a whole number of vCPUs", false)
	if err != nil {
		return o, err
	}
	if vcpus < 0 || vcpus > maxVCPUs {
		s, l, _, _ := m.scalar("vcpus", "")
		return o, m.bad("vcpus", l, s, fmt.Sprintf("a whole number of vCPUs 0..%d", maxVCPUs), nil)
	}
	o.VCPUs = int(vcpus)
	if o.MemoryMiB, err = m.gib("memory_gib", "GiB of host memory in whole MiB, such as 1152 or 30.5"); err != nil {
		return o, err
	}
	if o.ID == "" {
		o.ID = defaultID(o.Provider, o.Region, o.InstanceType)
	}
	items, field, err := m.seq("plans", "a list of price plans")
	if err != nil {
		return o, err
	}
	for i, it := range items {
		p, err := d.plan(it, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return o, err
		}
		o.Plans = append(o.Plans, p)
	}
	return o, nil
}

// defaultID is the conventional offer id provider/region/instance_type,
// leaving out empty parts.
func defaultID(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "/")
}

func (d *ydec) plan(n *yaml.Node, path string) (core.PricePlan, error) {
	var p core.PricePlan
	m, err := d.mapping(n, path, planKeys, "a price plan")
	if err != nil {
		return p, err
	}
	const modeAllowed = "one of on-demand, spot, daily, weekly, monthly"
	s, line, ok, err := m.scalar("mode", modeAllowed)
	if err != nil {
		return p, err
	}
	if !ok {
		return p, m.missing("mode", modeAllowed)
	}
	if p.Mode, err = core.ParseBillingMode(strings.TrimSpace(s)); err != nil {
		return p, m.bad("mode", line, s, modeAllowed, err)
	}
	committed := p.Mode == core.Daily || p.Mode == core.Weekly || p.Mode == core.Monthly
	const perAllowed = "one of second, minute, hour, day, week, month"
	p.Per = termPeriod(p.Mode)
	if s, line, ok, err := m.scalar("per", perAllowed); err != nil {
		return p, err
	} else if ok {
		if p.Per, err = core.ParsePeriod(s); err != nil {
			return p, m.bad("per", line, s, perAllowed, err)
		}
	}
	price, hasPrice, err := m.money("price", priceAllowed, false)
	if err != nil {
		return p, err
	}
	p.Price = price
	if p.Term, _, err = m.span("term", !committed, false); err != nil {
		return p, err
	}
	if committed && p.Term == 0 {
		p.Term = termPeriod(p.Mode).Seconds()
	}
	p.Granularity = p.Per.Seconds()
	if committed {
		p.Granularity = p.Term
	}
	if g, ok, err := m.span("granularity", false, false); err != nil {
		return p, err
	} else if ok {
		p.Granularity = g
	}
	if p.MinCharge, _, err = m.span("min_charge", true, false); err != nil {
		return p, err
	}
	if m.has("early_termination") {
		em, err := d.mapping(m.vals["early_termination"], join(path, "early_termination"), etKeys, "an early-termination rule")
		if err != nil {
			return p, err
		}
		et := &core.EarlyTermination{}
		if et.Granularity, _, err = em.span("granularity", false, true); err != nil {
			return p, err
		}
		if et.Fee, _, err = em.money("fee", "a fee >= 0", false); err != nil {
			return p, err
		}
		p.EarlyTermination = et
	}
	items, field, err := m.seq("series", "a list of {at, price} points")
	if err != nil {
		return p, err
	}
	for i, it := range items {
		pm, err := d.mapping(it, fmt.Sprintf("%s[%d]", field, i), pointKeys, "a price point")
		if err != nil {
			return p, err
		}
		var pt core.PricePoint
		if pt.At, err = pm.when("at", true); err != nil {
			return p, err
		}
		if pt.Price, _, err = pm.money("price", priceAllowed, true); err != nil {
			return p, err
		}
		p.Series = append(p.Series, pt)
	}
	if !hasPrice {
		if len(p.Series) == 0 {
			return p, m.missing("price", priceAllowed)
		}
		p.Price = p.Series[0].Price
	}
	if m.has("reclaim") {
		rm, err := d.mapping(m.vals["reclaim"], join(path, "reclaim"), reclaimKeys, "a reclaim model")
		if err != nil {
			return p, err
		}
		r := &core.ReclaimModel{}
		if r.Bucket, err = rm.str("bucket", "the provider's label, such as >20%", false); err != nil {
			return p, err
		}
		const rateAllowed = "a percentage 0%..100% such as 25% or 12.5% (at most two decimals)"
		s, line, ok, err := rm.scalar("monthly_rate", rateAllowed)
		if err != nil {
			return p, err
		}
		if !ok {
			return p, rm.missing("monthly_rate", rateAllowed)
		}
		bp, ok := parsePercentBP(s)
		if !ok || bp < 0 || bp > 10000 {
			return p, rm.bad("monthly_rate", line, s, rateAllowed, nil)
		}
		r.MonthlyRateBP = bp
		if r.NoticeSeconds, _, err = rm.span("notice", true, false); err != nil {
			return p, err
		}
		p.Reclaim = r
	}
	if m.has("time_of_use") {
		t, err := d.timeOfUse(m.vals["time_of_use"], join(path, "time_of_use"))
		if err != nil {
			return p, err
		}
		p.TimeOfUse = t
	}
	return p, nil
}

func (d *ydec) timeOfUse(n *yaml.Node, path string) (*core.TimeOfUse, error) {
	m, err := d.mapping(n, path, touKeys, "a time-of-use tariff")
	if err != nil {
		return nil, err
	}
	const tzAllowed = "an IANA time zone such as Asia/Shanghai or UTC"
	s, line, ok, err := m.scalar("timezone", tzAllowed)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, m.missing("timezone", tzAllowed)
	}
	name := strings.TrimSpace(s)
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" || name == "Local" {
		return nil, m.bad("timezone", line, s, tzAllowed, err)
	}
	t := &core.TimeOfUse{Location: loc}
	items, field, err := m.seq("windows", "a list of windows {weekdays, start, end, multiplier}")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, m.missing("windows", "at least one window {weekdays, start, end, multiplier}")
	}
	for i, it := range items {
		wpath := fmt.Sprintf("%s[%d]", field, i)
		wm, err := d.mapping(it, wpath, windowKeys, "a time-of-use window")
		if err != nil {
			return nil, err
		}
		var w core.Window
		const daysAllowed = "weekday names (mon, tue, …), ranges such as mon-fri, all, weekdays or weekends"
		days, err := wm.stringList("weekdays", daysAllowed)
		if err != nil {
			return nil, err
		}
		if !wm.has("weekdays") {
			return nil, wm.missing("weekdays", daysAllowed)
		}
		if w.Weekdays, err = d.weekdays(wm, days, daysAllowed); err != nil {
			return nil, err
		}
		if w.StartHour, err = wm.hour("start", "an hour 0..23 (local time), such as 22 or 22:00"); err != nil {
			return nil, err
		}
		if w.EndHour, err = wm.hour("end", "an hour 0..24 (local time, exclusive), such as 6 or 06:00"); err != nil {
			return nil, err
		}
		const multAllowed = "a price factor 0..100 such as 0.5 (half price), at most four decimals"
		s, line, ok, err := wm.scalar("multiplier", multAllowed)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, wm.missing("multiplier", multAllowed)
		}
		bp, ok := parseFactorBP(s)
		if !ok || bp < 0 || bp > 1_000_000 {
			return nil, wm.bad("multiplier", line, s, multAllowed, nil)
		}
		w.MultiplierBP = bp
		t.Windows = append(t.Windows, w)
	}
	return t, nil
}

// hour reads a window boundary: 22 or "22:00".
func (m *ymap) hour(key, allowed string) (int, error) {
	s, line, ok, err := m.scalar(key, allowed)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, m.missing(key, allowed)
	}
	t := strings.TrimSuffix(strings.TrimSpace(s), ":00")
	h, err := strconv.Atoi(t)
	if err != nil || h < 0 || h > 24 || len(t) > 2 {
		return 0, m.bad(key, line, s, allowed, err)
	}
	return h, nil
}

var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

func dayName(d time.Weekday) string {
	if d >= 0 && int(d) < len(dayNames) {
		return dayNames[d]
	}
	return strconv.Itoa(int(d))
}

// parseDay reads one weekday name ("mon", "Monday").
func parseDay(s string) (time.Weekday, bool) {
	t := strings.ToLower(strings.TrimSpace(s))
	for i, n := range dayNames {
		if t == n || t == strings.ToLower(time.Weekday(i).String()) {
			return time.Weekday(i), true
		}
	}
	return 0, false
}

// weekdaySpec expands one weekday spec: a name, a range (fri-mon wraps),
// or all, weekdays, weekends.
func weekdaySpec(s string) ([]time.Weekday, bool) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "all", "daily", "everyday":
		t = "mon-sun"
	case "weekdays", "workdays":
		t = "mon-fri"
	case "weekends", "weekend":
		t = "sat-sun"
	}
	if a, b, ok := strings.Cut(t, "-"); ok {
		from, ok1 := parseDay(a)
		to, ok2 := parseDay(b)
		if !ok1 || !ok2 {
			return nil, false
		}
		var out []time.Weekday
		for d := from; ; d = (d + 1) % 7 {
			out = append(out, d)
			if d == to {
				break
			}
		}
		return out, true
	}
	d, ok := parseDay(t)
	if !ok {
		return nil, false
	}
	return []time.Weekday{d}, true
}

func (d *ydec) weekdays(m *ymap, specs []string, allowed string) ([]time.Weekday, error) {
	var out []time.Weekday
	seen := map[time.Weekday]bool{}
	field := join(m.path, "weekdays")
	for i, spec := range specs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if len(specs) == 1 {
			f = field
		}
		line := d.pos[fmt.Sprintf("%s[%d]", field, i)].line
		for _, part := range strings.Split(spec, ",") {
			days, ok := weekdaySpec(part)
			if !ok {
				return nil, &ParseError{File: d.file, Line: line, Field: f, Value: spec, Allowed: allowed}
			}
			for _, day := range days {
				if seen[day] {
					return nil, &ParseError{File: d.file, Line: line, Field: f, Value: spec, Allowed: "each weekday once (" + dayName(day) + " is listed twice)"}
				}
				seen[day] = true
				out = append(out, day)
			}
		}
	}
	return out, nil
}

func (d *ydec) voucher(n *yaml.Node, path string) (core.Voucher, error) {
	var v core.Voucher
	m, err := d.mapping(n, path, voucherKeys, "a voucher")
	if err != nil {
		return v, err
	}
	if v.ID, err = m.str("id", "a voucher id", true); err != nil {
		return v, err
	}
	const shareAllowed = "a share of eligible cost above 0 and at most 100%, such as 30% or 0.3"
	s, line, ok, err := m.scalar("share", shareAllowed)
	if err != nil {
		return v, err
	}
	if !ok {
		return v, m.missing("share", shareAllowed)
	}
	bp, ok := parseShareBP(s)
	if !ok || bp <= 0 || bp > 10000 {
		return v, m.bad("share", line, s, shareAllowed, nil)
	}
	v.ShareBP = bp
	if v.Cap, _, err = m.money("cap", "the most the voucher covers in total, an amount > 0", true); err != nil {
		return v, err
	}
	if v.ValidFrom, err = m.when("valid_from", true); err != nil {
		return v, err
	}
	if v.ValidTo, err = m.when("valid_to", true); err != nil {
		return v, err
	}
	if v.Providers, err = m.stringList("providers", "a list of provider names"); err != nil {
		return v, err
	}
	if v.GPUModels, err = m.stringList("gpu_models", "a list of GPU models"); err != nil {
		return v, err
	}
	modes, err := m.stringList("modes", "a list of billing modes")
	if err != nil {
		return v, err
	}
	for i, s := range modes {
		mode, err := core.ParseBillingMode(strings.TrimSpace(s))
		if err != nil {
			f := fmt.Sprintf("%s[%d]", join(path, "modes"), i)
			return v, &ParseError{File: d.file, Line: d.pos[f].line, Field: f, Value: s, Allowed: "one of on-demand, spot, daily, weekly, monthly", Err: err}
		}
		v.Modes = append(v.Modes, mode)
	}
	return v, nil
}
