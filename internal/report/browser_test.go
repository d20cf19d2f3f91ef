package report_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpufleet/gpufleet/internal/browsertest"
	"github.com/gpufleet/gpufleet/internal/policy"
	"github.com/gpufleet/gpufleet/internal/pricing"
	provsim "github.com/gpufleet/gpufleet/internal/provider/sim"
	"github.com/gpufleet/gpufleet/internal/report"
	"github.com/gpufleet/gpufleet/internal/sim"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// TestSimHTMLInBrowser opens the what-if report of a real replay (every
// policy, 300 synthetic jobs, the demo catalog) in headless chromium from
// a file, and checks what only rendering shows: the page loads nothing
// from anywhere, every chart is drawn at its size, every line stays in its
// chart and every label inside its SVG (nothing clipped), and the table has
// a row per policy.
func TestSimHTMLInBrowser(t *testing.T) {
	gc := trace.DefaultGenConfig()
	gc.Jobs = 300
	tr := trace.Generate(gc, 3)
	tw, err := tr.Workload(trace.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	offers := pricing.Demo().Offers
	w := sim.NewWorkload(tw, offers, 0)
	cfg := sim.Config{Workload: w, Offers: offers, Seed: 1, Provider: provsim.Config{Default: provsim.Settings{Delay: provsim.Fixed(2 * time.Minute)}}}
	var results []*sim.Result
	for _, name := range policy.PresetNames {
		p, err := policy.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sim.Run(context.Background(), cfg, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		results = append(results, r)
	}
	bound, err := sim.PriceBound(w, offers, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := report.NewSimView("synthetic 300 <jobs>", "USD", 1, trace.DefaultProfile().Describe(), results, bound, w.Skipped)
	path := filepath.Join(t.TempDir(), "whatif.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteSimHTML(f, v, results); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	ctx := browsertest.Start(t, 1280, 900, 2*time.Minute)
	if _, err := chromedp.Run(ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("open the report: %v", err)
	}
	// Boxes are compared in each SVG's own user units: the SVG's box in the
	// page against its child's, both from getBoundingClientRect (one
	// pixel of slack for anti-aliased strokes).
	const check = `(() => {
		const out = {resources: performance.getEntriesByType("resource").length, rows: [], charts: 0, problems: [], profile: false};
		for (const tr of document.querySelectorAll("table tr")) {
			const td = tr.querySelector("td");
			if (td) out.rows.push(td.textContent);
		}
		for (const svg of document.querySelectorAll("svg")) {
			out.charts++;
			const name = svg.getAttribute("aria-label");
			const box = svg.getBoundingClientRect();
			if (box.width < 100 || box.height < 50) out.problems.push(name + ": drawn " + box.width + "x" + box.height);
			const inside = (el, what) => {
				const b = el.getBoundingClientRect();
				if (b.left < box.left - 1 || b.right > box.right + 1 || b.top < box.top - 1 || b.bottom > box.bottom + 1)
					out.problems.push(name + ": " + what + " " + JSON.stringify([b.left - box.left, b.top - box.top, b.right - box.left, b.bottom - box.top]) + " outside " + box.width + "x" + box.height);
			};
			for (const t of svg.querySelectorAll("text")) inside(t, "label " + JSON.stringify(t.textContent));
			for (const p of svg.querySelectorAll("polyline")) {
				if (p.points.numberOfItems < 2) out.problems.push(name + ": a line of " + p.points.numberOfItems + " points");
				inside(p, "line");
			}
			for (const r of svg.querySelectorAll("rect")) inside(r, "bar");
		}
		for (const h of document.querySelectorAll("h2")) if (h.textContent === "Workload profile") out.profile = true;
		return out;
	})()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[rendered](check))
	if err != nil {
		t.Fatalf("inspect the report: %v", err)
	}
	if got.Resources != 0 {
		t.Errorf("the report loaded %d resources; it must be self-contained", got.Resources)
	}
	if len(got.Rows) != len(policy.PresetNames) {
		t.Errorf("table rows %v, want one per policy %v", got.Rows, policy.PresetNames)
	}
	// Cost and idle bars, two time series per policy that rented (all
	// four do), and at least one waiting-time CDF.
	if want := 2 + 2*len(results) + 1; got.Charts < want {
		t.Errorf("%d charts drawn, want at least %d", got.Charts, want)
	}
	for _, p := range got.Problems {
		t.Error(p)
	}
	if !got.Profile {
		t.Error("the report does not print the workload profile")
	}
}

// rendered is what the browser saw of a report.
type rendered struct {
	Resources int      `json:"resources"` // subresources loaded
	Rows      []string `json:"rows"`      // the table's first cells
	Charts    int      `json:"charts"`
	Problems  []string `json:"problems"` // charts drawn too small, lines or labels outside their chart
	Profile   bool     `json:"profile"`
}
