package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports holds the package to its doc comment: no file or network
// I/O, no logging, no global randomness, no wall clock, and of ours only
// core, clock and provider.
func TestImports(t *testing.T) {
	forbidden := map[string]bool{
		"os": true, "os/exec": true, "os/signal": true, "io/fs": true, "io/ioutil": true,
		"net": true, "net/http": true, "database/sql": true, "syscall": true, "plugin": true,
		"log": true, "log/slog": true, "math/rand": true, "embed": true,
	}
	const module = "github.com/gpufleet/gpufleet/"
	ours := map[string]bool{module + "internal/core": true, module + "internal/clock": true, module + "internal/provider": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case forbidden[path]:
				t.Errorf("%s imports %s: the simulated provider does no I/O and no global randomness", name, path)
			case strings.HasPrefix(path, module) && !ours[path]:
				t.Errorf("%s imports %s: of ours, only core, clock and provider", name, path)
			case strings.Contains(path, ".") && !strings.HasPrefix(path, module):
				t.Errorf("%s imports %s: the standard library only", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "rand" {
					switch sel.Sel.Name {
					case "New", "NewPCG", "Source", "Rand":
					default:
						t.Errorf("%s: rand.%s: randomness comes from Config.Source, never the global source", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
					switch sel.Sel.Name {
					case "Now", "Since", "Until", "After", "Sleep", "Tick", "NewTimer", "NewTicker", "AfterFunc":
						t.Errorf("%s: time.%s: time comes from the clock and Poll's now", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
