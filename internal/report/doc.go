// Package report turns results into what people read: self-contained
// HTML (inline SVG charts, no scripts, no CDN, printable), CSV time
// series and JSON. The numbers come from the same result values the CLI
// and API print, so every view agrees.
package report
