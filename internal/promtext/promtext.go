package promtext

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Label is one name="value" pair of a Prometheus sample.
type Label struct {
	Name, Value string
}

// Sample is one sample line of the Prometheus text format.
type Sample struct {
	Line   int
	Name   string
	Labels []Label
	Value  float64
	// TimestampMs is the optional timestamp; 0 when absent.
	TimestampMs int64
}

// Label returns the value of the label called name, and whether it is
// there.
func (s Sample) Label(name string) (string, bool) {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

// Parse parses the Prometheus text exposition format — what a
// DCGM exporter serves — into its sample lines, in order. It accepts at
// least what prometheus/common's expfmt.TextParser accepts, with the same
// names, labels and values: values as Go's ParseFloat reads them less hex
// and underscores (so NaN and Inf in any case, with or without a sign),
// empty label sets, trailing commas, optional timestamps, and the quoted
// names of the 0.0.4 format's UTF-8 extension ("name" before or inside
// the braces, "label"="value"). Comments (# HELP, # TYPE and others) and
// blank lines are skipped; a histogram's or summary's lines come back as
// the plain samples they are written as. src names the input in errors,
// which are *core.ParseError with the line, the metric or label, and the
// offending text.
//
// It is a parser of our own rather than expfmt so that an error, and
// ParseDCGM's errors after it, can say on which line they are (expfmt
// keeps no line per sample), and so that one sample costs no protobuf
// message; FuzzParse checks it against expfmt.
func Parse(src string, body []byte) ([]Sample, error) {
	var out []Sample
	line := 0
	for len(body) > 0 {
		line++
		raw := body
		if n := bytes.IndexByte(body, '\n'); n >= 0 {
			raw, body = body[:n], body[n+1:]
		} else {
			body = nil
		}
		text := strings.Trim(string(raw), " \t\r")
		if text == "" || text[0] == '#' {
			continue
		}
		s, err := parsePromLine(text)
		if err != nil {
			err.File, err.Line = src, line
			return nil, err
		}
		s.Line = line
		out = append(out, s)
	}
	return out, nil
}

func isNameStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || (c >= '0' && c <= '9') }

func isLabelStart(c byte) bool { return isNameStart(c) && c != ':' }

func isLabelChar(c byte) bool { return isNameChar(c) && c != ':' }

func skipBlank(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// splitBlank splits s at runs of blanks and tabs, the only separators the
// format has.
func splitBlank(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
}

// parseName reads a metric name (label false) or a label name at s[i]:
// bare, of the format's characters, or in double quotes with the label
// value's escapes. It returns the name and the index just past it.
func parseName(s string, i int, label bool) (string, int, *core.ParseError) {
	what, start, char, allowed := "metric name", isNameStart, isNameChar, "[a-zA-Z_:][a-zA-Z0-9_:]* or a quoted name"
	if label {
		what, start, char, allowed = "label name", isLabelStart, isLabelChar, "[a-zA-Z_][a-zA-Z0-9_]* or a quoted name"
	}
	if i < len(s) && s[i] == '"' {
		name, next, err := parseQuoted(s, i)
		if err != nil {
			return "", 0, err
		}
		if name == "" {
			return "", 0, &core.ParseError{Field: what, Value: s[i:next], Problem: "empty " + what, Allowed: allowed}
		}
		return name, next, nil
	}
	j := i
	for j < len(s) && char(s[j]) {
		j++
	}
	if j == i || !start(s[i]) {
		return "", 0, &core.ParseError{Field: what, Value: s[i:], Problem: "invalid " + what + " at", Allowed: allowed}
	}
	return s[i:j], j, nil
}

// parseQuoted reads the double-quoted string at s[i] (s[i] is '"'), whose
// escapes are \\, \" and \n, and returns it and the index just past the
// closing quote.
func parseQuoted(s string, i int) (string, int, *core.ParseError) {
	var v strings.Builder
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; c {
		case '"':
			return v.String(), j + 1, nil
		case '\\':
			if j+1 >= len(s) {
				return "", 0, &core.ParseError{Value: s[i:], Problem: "unterminated string at", Allowed: "a closing double quote"}
			}
			switch s[j+1] {
			case '\\', '"':
				v.WriteByte(s[j+1])
			case 'n':
				v.WriteByte('\n')
			default:
				return "", 0, &core.ParseError{Value: s[j : j+2], Problem: "invalid escape", Allowed: `\\, \" or \n`}
			}
			j++
		default:
			v.WriteByte(c)
		}
	}
	return "", 0, &core.ParseError{Value: s[i:], Problem: "unterminated string at", Allowed: "a closing double quote"}
}

func parsePromLine(s string) (Sample, *core.ParseError) {
	var p Sample
	i := 0
	if s[0] != '{' {
		name, next, err := parseName(s, 0, false)
		if err != nil {
			return p, err
		}
		p.Name, i = name, skipBlank(s, next)
	}
	if i < len(s) && s[i] == '{' {
		name, labels, next, err := parseLabels(s, i+1, p.Name == "")
		if err != nil {
			err.Field = strings.TrimSpace(p.Name + " " + err.Field)
			return p, err
		}
		if p.Name == "" {
			if name == "" {
				return p, &core.ParseError{Field: "metric name", Value: s, Problem: "no metric name in", Allowed: `a name before the braces or first inside them: m{…} or {"m", …}`}
			}
			p.Name = name
		}
		p.Labels, i = labels, next
	}
	rest := splitBlank(s[i:])
	switch len(rest) {
	case 1, 2:
	case 0:
		return p, &core.ParseError{Field: p.Name, Value: s, Problem: "no value in", Allowed: "a float value after the metric"}
	default:
		return p, &core.ParseError{Field: p.Name, Value: s[i:], Problem: "trailing text", Allowed: "a value and an optional timestamp"}
	}
	v, err := parsePromFloat(rest[0])
	if err != nil {
		return p, &core.ParseError{Field: p.Name, Value: rest[0], Allowed: "a float, NaN, +Inf or -Inf"}
	}
	p.Value = v
	if len(rest) == 2 {
		ts, err := strconv.ParseInt(rest[1], 10, 64)
		if err != nil {
			return p, &core.ParseError{Field: p.Name + " timestamp", Value: rest[1], Allowed: "milliseconds since the epoch, an integer"}
		}
		p.TimestampMs = ts
	}
	return p, nil
}

// parsePromFloat reads a value as the format defines it: Go's ParseFloat
// (NaN, Inf and Infinity in any case, with an optional sign on the
// infinities) less hex floats and underscores, as expfmt does.
func parsePromFloat(s string) (float64, error) {
	if strings.ContainsAny(s, "pP_") {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseFloat(s, 64)
}

// parseLabels parses from just after '{' to just after '}'. With
// nameInside, one item may be a bare metric name (the UTF-8 extension's
// {"name", label="value"}); it is returned, empty when there was none.
func parseLabels(s string, i int, nameInside bool) (string, []Label, int, *core.ParseError) {
	var name string
	var labels []Label
	for {
		i = skipBlank(s, i)
		if i < len(s) && s[i] == '}' {
			return name, labels, i + 1, nil
		}
		item, next, err := parseName(s, i, true)
		if err != nil {
			err.Field = "label"
			return "", nil, 0, err
		}
		i = skipBlank(s, next)
		if i < len(s) && (s[i] == ',' || s[i] == '}') && nameInside && name == "" {
			name = item
		} else {
			if i >= len(s) || s[i] != '=' {
				return "", nil, 0, &core.ParseError{Field: "label " + item, Value: s[i:], Problem: "no '=' at", Allowed: `name="value"`}
			}
			i = skipBlank(s, i+1)
			if i >= len(s) || s[i] != '"' {
				return "", nil, 0, &core.ParseError{Field: "label " + item, Value: s[i:], Problem: "unquoted value at", Allowed: `a value in double quotes`}
			}
			v, next, err := parseQuoted(s, i)
			if err != nil {
				err.Field = "label " + item
				return "", nil, 0, err
			}
			labels = append(labels, Label{Name: item, Value: v})
			i = skipBlank(s, next)
		}
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		if i < len(s) && s[i] == '}' {
			return name, labels, i + 1, nil
		}
		return "", nil, 0, &core.ParseError{Field: "labels", Value: s[i:], Problem: "expected ',' or '}' at", Allowed: `name="value", …}`}
	}
}
