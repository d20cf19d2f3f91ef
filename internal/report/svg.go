package report

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// series is one line of a chart.
type series struct {
	Name   string
	Color  string
	Points [][2]float64 // x, y
	Step   bool
}

// lineChart renders series as an inline SVG with axes, min..max scaled.
func lineChart(title, xLabel, yLabel string, ss []series) string {
	const w, h, left, bottom, top, right = 720.0, 260.0, 60.0, 36.0, 28.0, 140.0
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for _, p := range s.Points {
			minX, maxX, maxY = math.Min(minX, p[0]), math.Max(maxX, p[0]), math.Max(maxY, p[1])
		}
	}
	if math.IsInf(minX, 1) || maxX == minX {
		maxX = minX + 1
	}
	if maxY == 0 {
		maxY = 1
	}
	px := func(x float64) float64 { return left + (x-minX)/(maxX-minX)*(w-left-right) }
	py := func(y float64) float64 { return h - bottom - y/maxY*(h-bottom-top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, w, h, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="18" font-size="14" font-weight="bold">%s</text>`, left, html.EscapeString(title))
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#444"/><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#444"/>`, left, h-bottom, w-right, h-bottom, left, top, left, h-bottom)
	for i := 0; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="end">%s</text><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#ddd"/>`, left-4, py(y)+3, num(y), left, py(y), w-right, py(y))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="start">%s</text><text x="%g" y="%g" font-size="10" text-anchor="end">%s</text>`, left, h-bottom+14, num(minX), w-right, h-bottom+14, num(maxX))
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11" text-anchor="middle">%s</text>`, (left+w-right)/2, h-6, html.EscapeString(xLabel))
	fmt.Fprintf(&b, `<text x="12" y="%g" font-size="11" transform="rotate(-90 12 %g)" text-anchor="middle">%s</text>`, (top+h-bottom)/2, (top+h-bottom)/2, html.EscapeString(yLabel))
	for i, s := range ss {
		var pts []string
		for k, p := range s.Points {
			if s.Step && k > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(s.Points[k-1][1])))
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.Color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="10" height="10" fill="%s"/><text x="%g" y="%g" font-size="11">%s</text>`, w-right+10, top+float64(i)*16, s.Color, w-right+24, top+float64(i)*16+9, html.EscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// barChart renders stacked horizontal bars: one bar per row, segments by
// key in order.
func barChart(title string, rows []string, keys []string, colors []string, values [][]float64, unit string) string {
	const w, rowH, left, top = 720.0, 26.0, 110.0, 30.0
	h := top + rowH*float64(len(rows)) + 40
	maxV := 0.0
	for _, r := range values {
		s := 0.0
		for _, v := range r {
			s += v
		}
		maxV = math.Max(maxV, s)
	}
	if maxV == 0 {
		maxV = 1
	}
	scale := (w - left - 150) / maxV
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, w, h, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="18" font-size="14" font-weight="bold">%s</text>`, left, html.EscapeString(title))
	for i, r := range rows {
		y := top + float64(i)*rowH
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11" text-anchor="end">%s</text>`, left-6, y+14, html.EscapeString(r))
		x := left
		total := 0.0
		for k, v := range values[i] {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%g" width="%.1f" height="%g" fill="%s"><title>%s: %s %s</title></rect>`, x, y+3, v*scale, rowH-8, colors[k%len(colors)], html.EscapeString(keys[k]), num(v), unit)
			x += v * scale
			total += v
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" font-size="11">%s %s</text>`, x+6, y+14, num(total), unit)
	}
	for k, key := range keys {
		x := left + float64(k)*130
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="10" height="10" fill="%s"/><text x="%g" y="%g" font-size="11">%s</text>`, x, h-22, colors[k%len(colors)], x+14, h-13, html.EscapeString(key))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func num(v float64) string {
	switch {
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
