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
	for _, want := range []string{"core", "billing", "plan"} {
		if !seen[want] {
			t.Errorf("package internal/%s not found: the rule would check nothing", want)
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
