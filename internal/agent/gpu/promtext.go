package gpu

import (
	"bufio"
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Label is one name="value" pair of a Prometheus sample.
type Label struct {
	Name, Value string
}

// PromSample is one sample line of the Prometheus text format.
type PromSample struct {
	Line   int
	Name   string
	Labels []Label
	Value  float64
	// TimestampMs is the optional timestamp; 0 when absent.
	TimestampMs int64
}

// Label returns the value of the label called name, and whether it is
// there.
func (s PromSample) Label(name string) (string, bool) {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

// ParsePromText parses the Prometheus text exposition format (version
// 0.0.4) — what a DCGM exporter serves — into its sample lines, in order.
// Comments (# HELP, # TYPE and others) and blank lines are skipped; a
// histogram's or summary's lines come back as the plain samples they are
// written as. src names the input in errors, which are *core.ParseError
// with the line, the metric or label, and the offending text.
//
// It is a parser of our own rather than prometheus/common's expfmt so
// that an error can say where it is and so that the agent needs no
// protobuf types; its tests check it against expfmt.
func ParsePromText(src string, body []byte) ([]PromSample, error) {
	var out []PromSample
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), " \t\r")
		text = strings.TrimLeft(text, " \t")
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
	if err := sc.Err(); err != nil {
		return nil, &core.ParseError{File: src, Line: line + 1, Problem: "unreadable line", Err: err}
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

func parsePromLine(s string) (PromSample, *core.ParseError) {
	var p PromSample
	i := 0
	for i < len(s) && (isNameChar(s[i])) {
		i++
	}
	if i == 0 || !isNameStart(s[0]) {
		return p, &core.ParseError{Field: "metric name", Value: s, Problem: "invalid metric name in", Allowed: "[a-zA-Z_:][a-zA-Z0-9_:]*"}
	}
	p.Name = s[:i]
	i = skipBlank(s, i)
	if i < len(s) && s[i] == '{' {
		labels, next, err := parseLabels(s, i+1)
		if err != nil {
			err.Field = p.Name + err.Field
			return p, err
		}
		p.Labels, i = labels, skipBlank(s, next)
	}
	rest := strings.Fields(s[i:])
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

// parsePromFloat is strconv.ParseFloat less the Go-only spellings the
// exposition format does not have (hex floats, underscores, "infinity").
func parsePromFloat(s string) (float64, error) {
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseFloat(s, 64)
}

// parseLabels parses from just after '{' to just after '}'.
func parseLabels(s string, i int) ([]Label, int, *core.ParseError) {
	var labels []Label
	for {
		i = skipBlank(s, i)
		if i < len(s) && s[i] == '}' {
			return labels, i + 1, nil
		}
		start := i
		for i < len(s) && isLabelChar(s[i]) {
			i++
		}
		if i == start || !isLabelStart(s[start]) {
			return nil, 0, &core.ParseError{Field: " label", Value: s[start:], Problem: "invalid label name at", Allowed: "[a-zA-Z_][a-zA-Z0-9_]*"}
		}
		name := s[start:i]
		i = skipBlank(s, i)
		if i >= len(s) || s[i] != '=' {
			return nil, 0, &core.ParseError{Field: " label " + name, Value: s[i:], Problem: "no '=' at", Allowed: `name="value"`}
		}
		i = skipBlank(s, i+1)
		if i >= len(s) || s[i] != '"' {
			return nil, 0, &core.ParseError{Field: " label " + name, Value: s[i:], Problem: "unquoted value at", Allowed: `a value in double quotes`}
		}
		var v strings.Builder
		i++
		closed := false
		for i < len(s) {
			c := s[i]
			if c == '"' {
				closed = true
				i++
				break
			}
			if c == '\\' {
				if i+1 >= len(s) {
					break
				}
				switch s[i+1] {
				case '\\':
					v.WriteByte('\\')
				case '"':
					v.WriteByte('"')
				case 'n':
					v.WriteByte('\n')
				default:
					return nil, 0, &core.ParseError{Field: " label " + name, Value: s[i : i+2], Problem: "invalid escape", Allowed: `\\, \" or \n`}
				}
				i += 2
				continue
			}
			v.WriteByte(c)
			i++
		}
		if !closed {
			return nil, 0, &core.ParseError{Field: " label " + name, Value: s[start:], Problem: "unterminated value at", Allowed: `a closing double quote`}
		}
		labels = append(labels, Label{Name: name, Value: v.String()})
		i = skipBlank(s, i)
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		if i < len(s) && s[i] == '}' {
			return labels, i + 1, nil
		}
		return nil, 0, &core.ParseError{Field: " labels", Value: s[i:], Problem: "expected ',' or '}' at", Allowed: `name="value", …}`}
	}
}
