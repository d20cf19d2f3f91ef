// Package dashboard is gpufleet's web dashboard: plain HTML, CSS and
// JavaScript embedded in the binary (no build step, no CDN, no external
// fonts), served by the API server (internal/api mounts Handler at / and
// /ui/). The page logs in with an API token kept in sessionStorage and
// renders the API's JSON as it is: every figure comes from an API field
// (GET /api/v1/overview and the other routes); the script formats, it
// never recomputes. docs/dashboard.md lists the pages and their fields.
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every dashboard response: the page
// loads only its own scripts, styles and images, and is never framed.
// Reports (the audit report, a simulator report the user opens) are shown
// in a sandboxed frame (srcdoc, no scripts) that inherits this policy, so
// their inline styles are allowed; the page itself sets none and builds
// its markup with textContent only.
const CSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Assets returns the embedded files by name ("index.html", "app.js", ...).
func Assets() map[string][]byte {
	out := map[string][]byte{}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		out[strings.TrimPrefix(p, "assets/")] = b
		return nil
	})
	return out
}

// Handler serves the dashboard: GET / is the page, GET /ui/NAME an asset.
// Every response carries CSP, nosniff and no-referrer; assets are
// revalidated by ETag (Cache-Control: no-cache), so a new binary's page is
// picked up at once and an unchanged one costs a 304.
func Handler() http.Handler {
	files := map[string]asset{}
	for name, b := range Assets() {
		ct := mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) { // not left to the host's mime tables
		case ".html":
			ct = "text/html; charset=utf-8"
		case ".js":
			ct = "text/javascript; charset=utf-8"
		case ".css":
			ct = "text/css; charset=utf-8"
		case ".svg":
			ct = "image/svg+xml"
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(b)
		files[name] = asset{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/ui/")
		if r.URL.Path == "/" {
			name = "index.html"
		}
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		a, ok := files[name]
		if !ok || strings.Contains(name, "/") {
			h.Set("Content-Type", "text/plain; charset=utf-8")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("not found\n"))
			return
		}
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(a.body)
	})
}
