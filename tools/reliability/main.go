// Command reliability renders docs/RELIABILITY.md from a test run: the
// entries the reliability tests recorded through internal/reltest and the
// fuzz summary .ci/fuzz wrote. .ci/reliability runs both and this.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gpufleet/gpufleet/internal/reltest"
)

type fuzzResult struct {
	Package string `json:"package"`
	Target  string `json:"target"`
	Seconds int    `json:"seconds"`
	Execs   int64  `json:"execs"`
	OK      bool   `json:"ok"`
}

func main() {
	testsPath := flag.String("tests", "", "JSON lines written by the tests (GPUFLEET_RELIABILITY_OUT)")
	fuzzPath := flag.String("fuzz", "", "JSON lines written by .ci/fuzz (FUZZ_SUMMARY)")
	out := flag.String("o", "docs/RELIABILITY.md", "output file")
	header := flag.String("header", "", "a line saying when, where and from which commit the run was made")
	flag.Parse()
	var entries []reltest.Entry
	if err := readLines(*testsPath, &entries); err != nil {
		fail(err)
	}
	var fuzz []fuzzResult
	if *fuzzPath != "" {
		if err := readLines(*fuzzPath, &fuzz); err != nil {
			fail(err)
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		fail(err)
	}
	render(f, *header, entries, fuzz)
	if err := f.Close(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "reliability:", err)
	os.Exit(1)
}

// readLines decodes one JSON value per non-empty line of path into *dst.
func readLines[T any](path string, dst *[]T) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		*dst = append(*dst, v)
	}
	return sc.Err()
}

// relPackage turns a test's working directory into the package path
// relative to the module root.
func relPackage(dir string) string {
	dir = filepath.ToSlash(dir)
	for _, root := range []string{"/internal/", "/cmd/", "/tools/"} {
		if i := strings.LastIndex(dir, root); i >= 0 {
			return "./" + dir[i+1:]
		}
	}
	return dir
}

func cell(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }

func verdict(ok bool) string {
	if ok {
		return "held"
	}
	return "**FAILED**"
}

var areaOrder = map[string]int{"faults": 0, "security": 1, "input": 2, "load": 3, "soak": 4}

func render(w io.Writer, header string, entries []reltest.Entry, fuzz []fuzzResult) {
	fmt.Fprintln(w, "# Reliability and security: what was tried, and what held")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "This file is produced by `.ci/reliability` from a test run (the tests record their entries")
	fmt.Fprintln(w, "through `internal/reltest`; the fuzz table is `.ci/fuzz`'s summary). Do not edit it by hand.")
	if header != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, header)
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if areaOrder[a.Area] != areaOrder[b.Area] {
			return areaOrder[a.Area] < areaOrder[b.Area]
		}
		if a.Area != b.Area {
			return a.Area < b.Area
		}
		if a.Package != b.Package {
			return a.Package < b.Package
		}
		return a.Test < b.Test
	})
	failed := 0
	for i, e := range entries {
		if i == 0 || e.Area != entries[i-1].Area {
			fmt.Fprintf(w, "\n## %s\n\n", strings.ToUpper(e.Area[:1])+e.Area[1:])
			fmt.Fprintln(w, "| test | what was done | how much | what was checked | result |")
			fmt.Fprintln(w, "|---|---|---|---|---|")
		}
		if !e.OK {
			failed++
		}
		fmt.Fprintf(w, "| `%s` `%s` | %s | %s | %s | %s |\n", relPackage(e.Package), cell(e.Test), cell(e.Done), cell(e.Amount), cell(e.Held), verdict(e.OK))
	}
	if len(fuzz) > 0 {
		sort.SliceStable(fuzz, func(i, j int) bool {
			if fuzz[i].Package != fuzz[j].Package {
				return fuzz[i].Package < fuzz[j].Package
			}
			return fuzz[i].Target < fuzz[j].Target
		})
		var execs int64
		fmt.Fprintf(w, "\n## Fuzzing\n\n")
		fmt.Fprintln(w, "| package | target | seconds | inputs tried | result |")
		fmt.Fprintln(w, "|---|---|---:|---:|---|")
		for _, f := range fuzz {
			execs += f.Execs
			if !f.OK {
				failed++
			}
			fmt.Fprintf(w, "| `%s` | `%s` | %d | %d | %s |\n", f.Package, f.Target, f.Seconds, f.Execs, verdict(f.OK))
		}
		fmt.Fprintf(w, "\n%d fuzz targets, %d inputs in all.\n", len(fuzz), execs)
	}
	fmt.Fprintf(w, "\n%d entries, %d failed.\n", len(entries)+len(fuzz), failed)
}
