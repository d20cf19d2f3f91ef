package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpufleet/gpufleet/internal/core"
)

// MaxBodyBytes is the largest request body accepted: Middleware bounds
// every request's body by it, and Decode answers 413 beyond it.
const MaxBodyBytes = 1 << 20

// Decode reads a JSON body strictly: unknown fields, a key given twice
// in one object, anything after the value, and a body over MaxBodyBytes
// are errors. encoding/json keeps the last of two equal keys (and matches
// keys without regard to case), so {"gpus":1,"GPUS":1000} would pass a
// reviewer who reads the first; CheckJSON refuses it before decoding.
// On an error Decode has answered (400, or 413 over the bound) and
// returns false; the caller writes nothing more.
func Decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = CheckJSON(body)
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
	}
	if err == nil {
		return true
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		WriteError(w, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("request body over %d bytes", tooBig.Limit))
		return false
	}
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		WriteError(w, http.StatusBadRequest, "invalid_json", dup.path, err.Error())
		return false
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		WriteError(w, http.StatusBadRequest, "invalid_argument", typeErr.Field, fmt.Sprintf("field %s: want %s", typeErr.Field, typeErr.Type))
		return false
	}
	WriteError(w, http.StatusBadRequest, "invalid_json", "", "invalid JSON body: "+err.Error())
	return false
}

// duplicateKeyError is a key given twice in one JSON object.
type duplicateKeyError struct {
	path  string // the key's path, e.g. quotas[1].gpu_class
	first string // the first spelling, when it differs in case
}

func (e *duplicateKeyError) Error() string {
	if e.first != "" {
		return fmt.Sprintf("invalid JSON body: key %s given twice (as %q too; keys match without regard to case)", e.path, e.first)
	}
	return fmt.Sprintf("invalid JSON body: key %s given twice", e.path)
}

// CheckJSON reports the first key given twice in an object of data (keys
// equal under Unicode case folding, as encoding/json matches them), and
// anything but white space after the first value. Syntax errors are left
// to the decoder, which reports them with their offset.
//
// It is one pass over the bytes (every request body goes through it):
// no tokens are allocated, a key is a string only while its object is
// read, and a key's path is built only for the error.
func CheckJSON(data []byte) error {
	c := jsonChecker{data: data}
	c.space()
	if err := c.value(nil, 0); err != nil {
		if errors.Is(err, errSyntax) {
			return nil
		}
		return err
	}
	c.space()
	if c.i < len(c.data) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// errSyntax stops CheckJSON at malformed JSON (or an empty body), which
// the decoder then reports with its offset.
var errSyntax = errors.New("json syntax")

// maxJSONDepth is encoding/json's bound on nesting: deeper is its error.
const maxJSONDepth = 10000

// jsonPath is where a value is: a key of an object or an index of an
// array under parent (nil: the document). String renders it as
// quotas[1].gpu_class.
type jsonPath struct {
	parent *jsonPath
	key    string
	index  int // -1 for a key
}

func (p *jsonPath) String() string {
	if p == nil {
		return ""
	}
	parent := p.parent.String()
	if p.index >= 0 {
		return parent + "[" + strconv.Itoa(p.index) + "]"
	}
	if parent == "" {
		return p.key
	}
	return parent + "." + p.key
}

// jsonChecker scans data from i.
type jsonChecker struct {
	data []byte
	i    int
}

func (c *jsonChecker) space() {
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value checks the value at i, at path p and nesting depth.
func (c *jsonChecker) value(p *jsonPath, depth int) error {
	if c.i >= len(c.data) {
		return errSyntax
	}
	switch b := c.data[c.i]; {
	case b == '{':
		if depth >= maxJSONDepth {
			return errSyntax
		}
		c.i++
		return c.object(p, depth+1)
	case b == '[':
		if depth >= maxJSONDepth {
			return errSyntax
		}
		c.i++
		return c.array(p, depth+1)
	case b == '"':
		if _, ok := c.str(); !ok {
			return errSyntax
		}
		return nil
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return errSyntax
}

func (c *jsonChecker) literal(lit string) error {
	if !bytes.HasPrefix(c.data[c.i:], []byte(lit)) {
		return errSyntax
	}
	c.i += len(lit)
	return nil
}

// number checks -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (c *jsonChecker) number() error {
	d := c.data
	if c.i < len(d) && d[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(d) && d[c.i] == '0':
		c.i++
	case c.digits() == 0:
		return errSyntax
	}
	if c.i < len(d) && d[c.i] == '.' {
		c.i++
		if c.digits() == 0 {
			return errSyntax
		}
	}
	if c.i < len(d) && (d[c.i] == 'e' || d[c.i] == 'E') {
		c.i++
		if c.i < len(d) && (d[c.i] == '+' || d[c.i] == '-') {
			c.i++
		}
		if c.digits() == 0 {
			return errSyntax
		}
	}
	return nil
}

func (c *jsonChecker) digits() int {
	n := 0
	for c.i < len(c.data) && c.data[c.i] >= '0' && c.data[c.i] <= '9' {
		c.i++
		n++
	}
	return n
}

// str scans the string at i (its opening quote) and returns it raw,
// quotes included; plain reports that it has no escapes and is ASCII,
// so that its text is its value.
func (c *jsonChecker) str() (raw []byte, ok bool) {
	raw, _, ok = c.scanStr()
	return raw, ok
}

func (c *jsonChecker) scanStr() (raw []byte, plain, ok bool) {
	d, start := c.data, c.i
	plain = true
	for c.i++; c.i < len(d); c.i++ {
		switch b := d[c.i]; {
		case b == '"':
			c.i++
			return d[start:c.i], plain, true
		case b < 0x20:
			return nil, false, false
		case b >= 0x80:
			plain = false
		case b == '\\':
			plain = false
			c.i++
			if c.i >= len(d) {
				return nil, false, false
			}
			switch d[c.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if c.i+4 >= len(d) {
					return nil, false, false
				}
				for _, h := range d[c.i+1 : c.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return nil, false, false
					}
				}
				c.i += 4
			default:
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

// key scans the string at i and returns its value.
func (c *jsonChecker) key() (string, bool) {
	raw, plain, ok := c.scanStr()
	if !ok {
		return "", false
	}
	if plain {
		return string(raw[1 : len(raw)-1]), true
	}
	// Escapes or UTF-8 (invalid UTF-8 becomes U+FFFD): as the decoder
	// reads it.
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", false
	}
	return k, true
}

// keySet holds an object's keys: a list while it is short, then a map
// by folded key.
type keySet struct {
	list   []string
	folded map[string]string
}

// add adds key, or returns the first spelling of a key equal to it under
// case folding.
func (s *keySet) add(key string) (first string, dup bool) {
	if s.folded == nil {
		for _, k := range s.list {
			if foldEqual(k, key) {
				return k, true
			}
		}
		if len(s.list) < 16 {
			s.list = append(s.list, key)
			return "", false
		}
		s.folded = make(map[string]string, 2*len(s.list))
		for _, k := range s.list {
			s.folded[foldKey(k)] = k
		}
	}
	f := foldKey(key)
	if k, ok := s.folded[f]; ok {
		return k, true
	}
	s.folded[f] = key
	return "", false
}

// foldEqual reports whether foldKey(a) == foldKey(b), without building
// either for ASCII keys (whose fold is their upper case).
func foldEqual(a, b string) bool {
	if len(a) == len(b) {
		ascii := true
		for i := 0; i < len(a); i++ {
			x, y := a[i], b[i]
			if x >= 0x80 || y >= 0x80 {
				ascii = false
				break
			}
			if 'a' <= x && x <= 'z' {
				x -= 'a' - 'A'
			}
			if 'a' <= y && y <= 'z' {
				y -= 'a' - 'A'
			}
			if x != y {
				return false
			}
		}
		if ascii {
			return true
		}
	}
	for i := 0; i < len(a); i++ {
		if a[i] >= 0x80 {
			return foldKey(a) == foldKey(b)
		}
	}
	for i := 0; i < len(b); i++ {
		if b[i] >= 0x80 {
			return foldKey(a) == foldKey(b)
		}
	}
	return false // ASCII, of different lengths
}

// object checks the rest of an object, its '{' read.
func (c *jsonChecker) object(p *jsonPath, depth int) error {
	var keys keySet
	c.space()
	if c.i < len(c.data) && c.data[c.i] == '}' {
		c.i++
		return nil
	}
	for {
		c.space()
		if c.i >= len(c.data) || c.data[c.i] != '"' {
			return errSyntax
		}
		key, ok := c.key()
		if !ok {
			return errSyntax
		}
		at := &jsonPath{parent: p, key: key, index: -1}
		if first, dup := keys.add(key); dup {
			e := &duplicateKeyError{path: at.String()}
			if first != key {
				e.first = first
			}
			return e
		}
		c.space()
		if c.i >= len(c.data) || c.data[c.i] != ':' {
			return errSyntax
		}
		c.i++
		c.space()
		if err := c.value(at, depth); err != nil {
			return err
		}
		if done, err := c.sep('}'); done || err != nil {
			return err
		}
	}
}

// sep reads what follows an object's member or an array's element: ','
// (more to come) or close (the end of it).
func (c *jsonChecker) sep(close byte) (done bool, err error) {
	c.space()
	if c.i >= len(c.data) {
		return false, errSyntax
	}
	switch c.data[c.i] {
	case ',':
		c.i++
		return false, nil
	case close:
		c.i++
		return true, nil
	}
	return false, errSyntax
}

// array checks the rest of an array, its '[' read.
func (c *jsonChecker) array(p *jsonPath, depth int) error {
	c.space()
	if c.i < len(c.data) && c.data[c.i] == ']' {
		c.i++
		return nil
	}
	for n := 0; ; n++ {
		c.space()
		if err := c.value(&jsonPath{parent: p, index: n}, depth); err != nil {
			return err
		}
		if done, err := c.sep(']'); done || err != nil {
			return err
		}
	}
}

// foldKey maps s to one representative of its case-folding class: each
// rune becomes the smallest rune of its unicode.SimpleFold orbit, so two
// keys that strings.EqualFold matches map to one string.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	} `json:"error"`
}

// WriteValidation answers err, a request that is not valid, with a 400:
// invalid_argument naming the field of a core.FieldError.
func WriteValidation(w http.ResponseWriter, err error) {
	var fe *core.FieldError
	if errors.As(err, &fe) {
		WriteError(w, http.StatusBadRequest, "invalid_argument", fe.Field, err.Error())
		return
	}
	WriteError(w, http.StatusBadRequest, "invalid_argument", "", err.Error())
}

// WriteError answers status with an ErrorBody: code is stable for
// clients to test, field names the offending parameter or body field
// ("" for none), msg says what is allowed.
func WriteError(w http.ResponseWriter, status int, code, field, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Field, b.Error.Message = code, field, msg
	WriteJSON(w, status, b)
}

// WriteJSON answers status with v as indented JSON, typed so that no
// browser sniffs it as anything else.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
