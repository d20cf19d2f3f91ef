package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzCheckJSON: CheckJSON accepts a valid document only if no object in
// it repeats a key (so decoding loses nothing), and never panics.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `[{"a":{"b":1,"b":2}}]`, `{"a":1}}`, `1 2`, `"x"`, `{"a":[1,{"k":"v","K":"w"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckJSON(data)
		if err != nil || !json.Valid(data) {
			return
		}
		// Numbers as json.Number: a valid number such as 1E700 does not
		// fit a float64, and that is the typed decoder's error to give.
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("valid %q does not decode: %v", data, err)
		}
		if keys, kept := keyTokens(t, data), mapEntries(v); keys != kept {
			t.Fatalf("accepted %q: %d keys, %d after decoding", data, keys, kept)
		}
	})
}

// keyTokens counts the object keys in data.
func keyTokens(t *testing.T, data []byte) int {
	type frame struct{ obj, wantKey bool }
	var st []frame
	done := func() { // a value ended: its object wants a key next
		if len(st) > 0 && st[len(st)-1].obj {
			st[len(st)-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if top := len(st) - 1; top >= 0 && st[top].obj && st[top].wantKey && tok != json.Delim('}') {
			n++
			st[top].wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			st = append(st, frame{obj: true, wantKey: true})
		case json.Delim('['):
			st = append(st, frame{})
		case json.Delim('}'), json.Delim(']'):
			st = st[:len(st)-1]
			done()
		default:
			done()
		}
	}
}

// mapEntries counts the entries of every map in v, keys equal under case
// folding counted once.
func mapEntries(v any) int {
	switch x := v.(type) {
	case map[string]any:
		folded := map[string]bool{}
		n := 0
		for k, e := range x {
			folded[strings.ToLower(k)] = true
			n += mapEntries(e)
		}
		return n + len(folded)
	case []any:
		n := 0
		for _, e := range x {
			n += mapEntries(e)
		}
		return n
	}
	return 0
}

// BenchmarkCheckJSON is the strict decoder's extra pass over a job body
// (duplicate keys, trailing data):
//
//	go test -run '^$' -bench CheckJSON ./internal/httpapi
func BenchmarkCheckJSON(b *testing.B) {
	body := []byte(`{"team":"ml","tier":"regular","gpus":8,"gpu_milli":1000,"gpu_mem_mib":40960,"models":["NVIDIA A100","NVIDIA H100"],` +
		`"throughput":{"NVIDIA A100":120,"NVIDIA H100":300},"cpu_milli":8000,"mem_mib":65536,"shards":1,"est_duration_seconds":5400,` +
		`"deadline":"2026-12-03T00:00:00Z","interruptible":true,"checkpoint_interval_seconds":600,"command":["python","train.py","--epochs=3"],"image":"ghcr.io/acme/train:3"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := CheckJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
