package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
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
	yStep := niceStep(maxY, 5)
	maxY = math.Ceil(maxY/yStep-1e-9) * yStep
	px := func(x float64) float64 { return left + (x-minX)/(maxX-minX)*(w-left-right) }
	py := func(y float64) float64 { return h - bottom - y/maxY*(h-bottom-top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, w, h, w, h, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="18" font-size="14" font-weight="bold">%s</text>`, left, html.EscapeString(title))
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#444"/><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#444"/>`, left, h-bottom, w-right, h-bottom, left, top, left, h-bottom)
	for y := 0.0; y <= maxY+yStep/2; y += yStep {
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="end">%s</text><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#ddd"/>`, left-4, py(y)+3, num(y), left, py(y), w-right, py(y))
	}
	xStep := niceStep(maxX-minX, 8)
	for x := math.Ceil(minX/xStep-1e-9) * xStep; x <= maxX+xStep*1e-9; x += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#444"/><text x="%.1f" y="%g" font-size="10" text-anchor="middle">%s</text>`, px(x), h-bottom, px(x), h-bottom+4, px(x), h-bottom+14, num(x))
	}
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

// niceStep is a tick spacing of 1, 2 or 5 × a power of ten that cuts
// span into at most n parts: ticks people read at a glance (0, 200, 400…
// rather than 0, 222, 444…).
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsInf(span, 0) || math.IsNaN(span) {
		return 1
	}
	raw := span / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw*(1-1e-9) {
			return m * pow
		}
	}
	return 10 * pow
}

// num renders v for a chart label: thousands grouped, and no more
// decimals than its size calls for (none from 100 up, one from 10, two
// below, trailing zeros dropped).
func num(v float64) string {
	switch {
	case math.Abs(v) >= 100:
		return grouped(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case math.Abs(v) >= 10:
		return trimZeros(strconv.FormatFloat(v, 'f', 1, 64))
	}
	return trimZeros(strconv.FormatFloat(v, 'f', 2, 64))
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

// grouped puts a comma between thousands of a decimal string's integer
// part: 1234567.5 becomes 1,234,567.5.
func grouped(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return sign + b.String()
}
