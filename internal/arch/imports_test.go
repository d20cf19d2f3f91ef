package arch

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/gpufleet/gpufleet"

// decision packages must be pure: state and time in, decisions out.
var decision = []string{"sched", "fleet", "billing", "plan", "engine", "policy"}

// forbidden are standard packages that do I/O or reach outside the
// process. A decision package may not depend on them, even indirectly
// through another package of ours.
var forbidden = []string{
	"os", "os/exec", "os/signal", "net", "net/http", "net/rpc", "database/sql",
	"io/ioutil", "io/fs", "syscall", "plugin", "log", "log/slog",
}

type pkg struct {
	ImportPath string
	Deps       []string
	Imports    []string
	Dir        string
	GoFiles    []string
}

func list(t *testing.T, pattern string) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	pkgs := list(t, module+"/internal/...")
	seen := map[string]bool{}
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module+"/internal/")
		top := strings.Split(rel, "/")[0]
		seen[top] = true
		if top == "core" {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module) {
					t.Errorf("%s depends on %s: core imports nothing of ours", p.ImportPath, d)
				}
				if strings.Contains(d, ".") && !strings.HasPrefix(d, module) {
					t.Errorf("%s depends on %s: core uses the standard library only", p.ImportPath, d)
				}
			}
		}
		checkLayers(t, p, rel, top)
		checkDirect(t, p, rel, top)
		if !contains(decision, top) {
			continue
		}
		// The standard library's own fmt and time import os, so the rule
		// is on direct imports: of the package and of every package of
		// ours it depends on.
		for _, q := range append([]pkg{p}, ours(byPath, p)...) {
			for _, d := range q.Imports {
				if contains(forbidden, d) {
					t.Errorf("%s imports %s (reached from %s): decision packages do no I/O", q.ImportPath, d, p.ImportPath)
				}
			}
		}
		checkNoWallClock(t, p)
	}
	for _, want := range []string{"core", "billing", "plan", "store", "agent", "kube", "loop", "api", "agentapi", "httpapi"} {
		if !seen[want] {
			t.Errorf("package internal/%s not found: the rule would check nothing", want)
		}
	}
}

// layers are the rules that keep the layers pointing one way, on the
// non-test dependencies (direct or not) of each package of ours: a
// package under top may depend only on the packages of ours in allowed
// (by top-level name under internal/), if allowed is set, and never on
// one in banned.
var layers = map[string]struct{ allowed, banned []string }{
	// The store persists core types only: a change of the engine's
	// working state is not a change of the schema. storetest, the
	// conformance suite, may use reltest's fault injection.
	"store": {allowed: []string{"core", "store", "reltest"}},
	// The agent runs what the server decided and reports what it sees;
	// deciding is the server's, so no decision package, and it reaches
	// the server only through its wire protocol.
	"agent": {banned: append([]string{"store", "server", "api", "agentapi", "httpapi", "sim", "dashboard"}, decision...)},
	// The agent protocol's server side is mounted by the REST API, never
	// the other way round; what agents report is the control loop's to
	// act on, so it reaches no loop and no decision package.
	"agentapi": {banned: append([]string{"api", "server", "loop", "sim", "dashboard", "readmodel", "client", "apiclient", "kube"}, decision...)},
	// The HTTP plumbing both APIs share knows no route of its own: the
	// store, the domain and the clock only.
	"httpapi": {allowed: []string{"core", "store", "clock", "httpapi"}},
	// The ledger is read by the API (usage report, dashboard) and by
	// the control loop and the simulator (team budgets, from the
	// engine's leases and units): it sits above the decision core and
	// the store, below everything that serves or runs.
	"ledger": {allowed: append([]string{"core", "billing", "pricing", "store", "ledger", "capacity"}, decision...)},
	// Decision packages are pure: they reach no layer that does I/O.
	// The Kubernetes scheduler keeps no store and serves nothing (see
	// direct, below, for what it may import).
	"kube": {banned: []string{"store", "server", "api", "agentapi", "httpapi", "apiclient", "client", "agent", "sim", "dashboard", "ledger"}},
	// The loop's shared steps drive the engine and a provider for both
	// the server and the simulator: they persist nothing and serve
	// nothing, so neither driver's layers are reachable from them.
	"loop": {banned: []string{"store", "server", "api", "agentapi", "httpapi", "apiclient", "client", "agent", "sim", "dashboard", "kube"}},
	// The dashboard's read model computes from the store and the ledger
	// and knows no HTTP: the API serves it, not the other way round.
	"readmodel": {banned: []string{"server", "api", "agentapi", "httpapi", "apiclient", "client", "agent", "sim", "dashboard", "kube", "loop"}},
	"sched":     {banned: ioLayers},
	"fleet":     {banned: ioLayers},
	"billing":   {banned: ioLayers},
	"plan":      {banned: ioLayers},
	"engine":    {banned: ioLayers},
}

// direct are rules on a package's own imports (not its dependencies'):
// under top, a package may import of ours only the packages in ours (by
// path under internal/), and of outside the standard library only paths
// with a prefix in outside.
var direct = map[string]struct{ ours, outside []string }{
	// The Kubernetes scheduler translates pods and nodes into the
	// engine's state and its decisions into API calls: the engine and the
	// domain, the policy and prices they take, client-go for I/O, and the
	// Kubernetes node pool (provider/kubenodes) for nodes as leases. No
	// store, no server, no API: the cluster is the state.
	"kube": {
		// fleet for the idle ladder's readings, and promtext to read
		// the cluster's dcgm-exporter pods (telemetry.go, dcgm.go);
		// capacity: what fits on a GPU that pods share (share.go), by
		// the engine's one rule.
		ours: []string{"core", "clock", "engine", "sched", "fleet", "policy", "pricing", "provider", "provider/kubenodes", "promtext", "capacity"},
		// and the Prometheus client for its metrics (metrics.go).
		outside: []string{"k8s.io/", "github.com/prometheus/client_golang/"},
	},
}

// checkDirect applies direct[top] to p's own imports.
func checkDirect(t *testing.T, p pkg, rel, top string) {
	rule, ok := direct[top]
	if !ok || rel != top {
		return
	}
	for _, d := range p.Imports {
		if in, ok := strings.CutPrefix(d, module+"/internal/"); ok {
			if !contains(rule.ours, in) {
				t.Errorf("internal/%s imports internal/%s: %s may import only %v of ours", rel, in, top, rule.ours)
			}
			continue
		}
		if !strings.Contains(strings.Split(d, "/")[0], ".") {
			continue // the standard library
		}
		allowed := false
		for _, prefix := range rule.outside {
			allowed = allowed || strings.HasPrefix(d, prefix)
		}
		if !allowed {
			t.Errorf("internal/%s imports %s: of outside the standard library %s may import only %v", rel, d, top, rule.outside)
		}
	}
}

// ioLayers are our packages that do I/O or speak to the outside.
var ioLayers = []string{"store", "server", "api", "agentapi", "httpapi", "agent", "provider", "client", "dashboard"}

// checkLayers applies layers[top] to p's dependencies.
func checkLayers(t *testing.T, p pkg, rel, top string) {
	rule, ok := layers[top]
	if !ok {
		return
	}
	for _, d := range p.Deps {
		if !strings.HasPrefix(d, module+"/internal/") {
			continue
		}
		dtop := strings.Split(strings.TrimPrefix(d, module+"/internal/"), "/")[0]
		if rule.allowed != nil && !contains(rule.allowed, dtop) {
			t.Errorf("internal/%s depends on internal/%s: %s may depend only on %v of ours", rel, strings.TrimPrefix(d, module+"/internal/"), top, rule.allowed)
		}
		if contains(rule.banned, dtop) {
			t.Errorf("internal/%s depends on internal/%s: %s must not depend on %v", rel, strings.TrimPrefix(d, module+"/internal/"), top, rule.banned)
		}
	}
}

// checkNoWallClock rejects time.Now, time.Since, time.Until, time.After,
// time.Sleep, time.Tick and time.NewTimer in a decision package's
// non-test files: time comes in as an argument.
func checkNoWallClock(t *testing.T, p pkg) {
	fset := token.NewFileSet()
	for _, f := range p.GoFiles {
		file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
				switch sel.Sel.Name {
				case "Now", "Since", "Until", "After", "Sleep", "Tick", "NewTimer", "NewTicker", "AfterFunc", "LoadLocation":
					t.Errorf("%s: time.%s in decision package %s: time comes in as an argument", fset.Position(sel.Pos()), sel.Sel.Name, p.ImportPath)
				}
			}
			return true
		})
	}
}

// ours returns the packages of this module that p depends on.
func ours(byPath map[string]pkg, p pkg) []pkg {
	var out []pkg
	for _, d := range p.Deps {
		if q, ok := byPath[d]; ok {
			out = append(out, q)
		}
	}
	return out
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}
