// Package examples runs the Example functions of the published packages
// that need a database and so a driver, which their modules do not
// require: there they compile, and show on pkg.go.dev, with the output
// that they print written after "// Prints:"; here they run, with that
// comment read as "// Output:", against SQLite.
package examples_test

import (
	"bytes"
	"encoding/json"
	"go/build/constraint"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// packages are the directories, from the repository's root, of the
// published packages whose modules require no driver and whose examples
// print what they do with a database.
var packages = []string{".", "idemhttp", "idemclient", "idemgrpc"}

// drivers links the drivers that the examples open into their test
// binary.
const drivers = `package run_test

import _ "modernc.org/sqlite"
`

var (
	packageClause = regexp.MustCompile(`(?m)^package \w+_test$`)
	prints        = regexp.MustCompile(`(?m)^(\s*)// Prints:`)
	topFunc       = regexp.MustCompile(`(?m)^func (\w+)`)
)

// TestExamplesPrint runs the examples of each package in packages whose
// output is written after "// Prints:", and wants each to print it: it
// lays the package's external test files that hold examples over package
// run. An example without a database keeps "// Output:" in its package,
// which runs it there; this runs it too.
func TestExamplesPrint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary per package")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	runDir, err := filepath.Abs("run")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range packages {
		t.Run(pkg, func(t *testing.T) {
			replace := map[string]string{}
			var want []string
			files, err := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
			if err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			for _, file := range files {
				src, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !packageClause.Match(src) || !bytes.Contains(src, []byte("\nfunc Example")) || excluded(src) {
					continue // no example, an internal test, or not built here
				}
				want = append(want, printing(src)...)
				src = packageClause.ReplaceAll(src, []byte("package run_test"))
				src = prints.ReplaceAll(src, []byte("$1// Output:"))
				laid := filepath.Join(tmp, filepath.Base(file))
				if err := os.WriteFile(laid, src, 0o644); err != nil {
					t.Fatal(err)
				}
				replace[filepath.Join(runDir, filepath.Base(file))] = laid
			}
			if len(want) == 0 {
				t.Fatalf("no example of %s prints after \"// Prints:\"", pkg)
			}
			laid := filepath.Join(tmp, "zz_drivers_test.go")
			if err := os.WriteFile(laid, []byte(drivers), 0o644); err != nil {
				t.Fatal(err)
			}
			replace[filepath.Join(runDir, "zz_drivers_test.go")] = laid
			overlay, err := json.Marshal(map[string]any{"Replace": replace})
			if err != nil {
				t.Fatal(err)
			}
			overlayFile := filepath.Join(tmp, "overlay.json")
			if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "test", "-count=1", "-vet=off", "-overlay", overlayFile, "-run", "^Example", "-v", ".")
			cmd.Dir = runDir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the examples of %s: %v\n%s", pkg, err, out)
			}
			for _, name := range want {
				if !strings.Contains(string(out), "--- PASS: "+name+" ") {
					t.Errorf("%s of %s did not run and pass:\n%s", name, pkg, out)
				}
			}
		})
	}
}

// printing returns the names of the examples in src, a Go file, whose
// body has a "// Prints:" comment: each top-level function runs to the
// next one.
func printing(src []byte) []string {
	var names []string
	funcs := topFunc.FindAllSubmatchIndex(src, -1)
	for i, m := range funcs {
		end := len(src)
		if i+1 < len(funcs) {
			end = funcs[i+1][0]
		}
		name := string(src[m[2]:m[3]])
		if strings.HasPrefix(name, "Example") && prints.Match(src[m[0]:end]) {
			names = append(names, name)
		}
	}
	return names
}

// excluded reports whether src has a build constraint, which this test
// does not evaluate: such a file is left out.
func excluded(src []byte) bool {
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if constraint.IsGoBuild(line) {
			return true
		}
	}
	return false
}
