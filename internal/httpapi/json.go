package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
func CheckJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := checkValue(dec, ""); err != nil {
		if errors.Is(err, errSyntax) {
			return nil
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// errSyntax stops CheckJSON at malformed JSON (or an empty body), which
// the decoder then reports with its offset.
var errSyntax = errors.New("json syntax")

// checkValue reads one value from dec, checking the keys of its objects;
// path names the value in errors.
func checkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return errSyntax
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]string{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errSyntax
			}
			key, _ := kt.(string)
			p := key
			if path != "" {
				p = path + "." + key
			}
			fold := foldKey(key)
			if first, ok := seen[fold]; ok {
				e := &duplicateKeyError{path: p}
				if first != key {
					e.first = first
				}
				return e
			}
			seen[fold] = key
			if err := checkValue(dec, p); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return errSyntax
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return errSyntax
		}
	}
	return nil
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
