package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/internal/core"
)

// MaxFileBytes bounds a policy file's size.
const MaxFileBytes = 1 << 20

// Parse reads a policy file (docs/policy.md): YAML whose keys are
// Policy's. Keys left out keep the values of the preset named by base
// (gpufleet when absent); maps (wait_targets, reserved.gpus,
// renting.provisioning_delay) are merged key by key, lists replaced.
// Unknown and duplicate keys, aliases, a second document and every value
// Validate refuses are errors: a *core.ParseError with the line, the
// field path, the value and what is allowed. name is the file's path, used
// in errors, as the policy's Source, and for its Name when it has none.
func Parse(name string, data []byte) (Policy, error) {
	d := &pdec{file: name, lines: map[string]int{}}
	if len(data) > MaxFileBytes {
		return Policy{}, &core.ParseError{File: name, Problem: "file too large", Value: strconv.Itoa(len(data)), Allowed: fmt.Sprintf("at most %d bytes", MaxFileBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Policy{}, &core.ParseError{File: name, Problem: "empty file", Allowed: "a policy (docs/policy.md)"}
		}
		return Policy{}, d.syntax(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return Policy{}, d.syntax(err)
		}
		return Policy{}, &core.ParseError{File: name, Line: extra.Line, Problem: "a second YAML document", Allowed: "one policy per file"}
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return Policy{}, &core.ParseError{File: name, Line: root.Line, Problem: "not a mapping", Allowed: "a policy: keys such as name, base, wait_targets (docs/policy.md)"}
	}
	base := DefaultName
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k, v := root.Content[i], root.Content[i+1]; k.Value == "base" && v.Kind == yaml.ScalarNode && v.Value != "" {
			base, d.lines["base"] = v.Value, k.Line
		}
	}
	p, err := Preset(base)
	if err != nil {
		return Policy{}, d.locate(&core.FieldError{Field: "base", Value: base, Allowed: "one of " + strings.Join(PresetNames, ", ")})
	}
	p.Name = ""
	if err := d.decode(root, reflect.ValueOf(&p).Elem(), ""); err != nil {
		return Policy{}, err
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	p.Source = name
	if err := p.Validate(); err != nil {
		return Policy{}, d.locate(err)
	}
	return p, nil
}

// pdec walks a YAML node tree into a Policy, recording each field's line.
type pdec struct {
	file  string
	lines map[string]int
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *pdec) syntax(err error) error {
	msg := err.Error()
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &core.ParseError{File: d.file, Line: line, Problem: "YAML syntax error: " + m[2], Err: err}
	}
	return &core.ParseError{File: d.file, Problem: "YAML syntax error: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
}

// locate turns a Validate error into a ParseError at its field's line
// (or the nearest enclosing key the file has).
func (d *pdec) locate(err error) error {
	var fe *core.FieldError
	if !errors.As(err, &fe) {
		return &core.ParseError{File: d.file, Problem: err.Error(), Err: err}
	}
	pe := &core.ParseError{File: d.file, Field: fe.Field, Value: fe.Value, Allowed: fe.Allowed}
	for f := fe.Field; f != ""; {
		if l, ok := d.lines[f]; ok {
			pe.Line = l
			break
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return pe
}

func (d *pdec) bad(n *yaml.Node, path, allowed string) error {
	return &core.ParseError{File: d.file, Line: n.Line, Field: path, Value: n.Value, Allowed: allowed}
}

var durationType = reflect.TypeFor[Duration]()

// decode sets v from n; path is v's field path.
func (d *pdec) decode(n *yaml.Node, v reflect.Value, path string) error {
	if _, ok := d.lines[path]; !ok && path != "" {
		d.lines[path] = n.Line
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return &core.ParseError{File: d.file, Line: n.Line, Field: path, Problem: "a YAML alias or anchor", Allowed: "plain values"}
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	if v.Type() == durationType {
		if n.Kind != yaml.ScalarNode {
			return d.bad(n, path, "a duration (0s, 30s, 5m, 1h30m)")
		}
		t, err := time.ParseDuration(strings.TrimSpace(n.Value))
		if err != nil {
			return d.bad(n, path, "a duration (0s, 30s, 5m, 1h30m)")
		}
		v.SetInt(int64(t))
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return d.bad(n, path, "a mapping of "+strings.Join(keysOf(v.Type()), ", "))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if seen[k.Value] {
				return &core.ParseError{File: d.file, Line: k.Line, Field: join(k.Value), Problem: "duplicate key", Value: k.Value, Allowed: "each key once"}
			}
			seen[k.Value] = true
			d.lines[join(k.Value)] = k.Line
			f, ok := fieldOf(v.Type(), k.Value)
			if !ok {
				where := "at the top level"
				if path != "" {
					where = "in " + path
				}
				return &core.ParseError{File: d.file, Line: k.Line, Field: join(k.Value), Problem: "unknown key " + where, Value: k.Value, Allowed: "one of " + strings.Join(keysOf(v.Type()), ", ")}
			}
			if err := d.decode(val, v.FieldByIndex(f.Index), join(k.Value)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return d.bad(n, path, "a mapping")
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Value == "" {
				return d.bad(k, path, "a non-empty key")
			}
			if seen[k.Value] {
				return &core.ParseError{File: d.file, Line: k.Line, Field: join(k.Value), Problem: "duplicate key", Value: k.Value, Allowed: "each key once"}
			}
			seen[k.Value] = true
			d.lines[join(k.Value)] = k.Line
			e := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(val, e, join(k.Value)); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
		}
		return nil
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.bad(n, path, "a list")
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			if err := d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return d.bad(n, path, "a single value")
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Value != "true" && n.Value != "false" {
			return d.bad(n, path, "true or false")
		}
		v.SetBool(n.Value == "true")
	case reflect.Int, reflect.Int64:
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
		if err != nil || v.OverflowInt(i) {
			return d.bad(n, path, "a whole number")
		}
		v.SetInt(i)
	default:
		return d.bad(n, path, "nothing: the field cannot be set from a file")
	}
	return nil
}

// fieldOf is t's field whose yaml key is key.
func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if k := yamlKey(f); k != "" && k == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keysOf lists t's yaml keys, in order.
func keysOf(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if k := yamlKey(t.Field(i)); k != "" {
			out = append(out, k)
		}
	}
	return out
}

func yamlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if k == "-" {
		return ""
	}
	return k
}

// Marshal writes p as a policy file Parse reads back to p (Source
// aside): every key, so the file says all the policy does.
func Marshal(p Policy) ([]byte, error) {
	p.Base = ""
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("policy: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("policy: marshal: %w", err)
	}
	return b.Bytes(), nil
}
