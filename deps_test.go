package idem_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// drivers are the module paths of the SQL drivers that idem is tested
// with, and of go-sqlmock: none may be built into a service that imports
// the library, which leaves the choice of driver to the service.
var drivers = []string{
	"github.com/lib/pq",
	"github.com/jackc/pgx",
	"github.com/go-sql-driver/mysql",
	"modernc.org/sqlite",
	"github.com/mattn/go-sqlite3",
	"github.com/DATA-DOG/go-sqlmock",
}

// TestPackagesPullNoDriver lists, with go list -deps, what the library's
// packages that services import bring into a binary, and fails on a SQL
// driver among them (idemtest may bring sqlmock, which it is built on).
func TestPackagesPullNoDriver(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to list the dependencies with: %v", err)
	}
	for pkg, allowed := range map[string]string{
		"github.com/idemgo/idem":            "",
		"github.com/idemgo/idem/dialect":    "",
		"github.com/idemgo/idem/driver":     "",
		"github.com/idemgo/idem/idemhttp":   "",
		"github.com/idemgo/idem/idemclient": "",
		// idemtest's Mock is built on sqlmock; its conflict errors are
		// its own, so that a service's tests link no other driver.
		"github.com/idemgo/idem/idemtest": "github.com/DATA-DOG/go-sqlmock",
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, pkg) {
			t.Fatalf("go list -deps %s does not list the package itself: %q", pkg, deps)
		}
		for _, d := range deps {
			for _, drv := range drivers {
				if drv != allowed && (d == drv || strings.HasPrefix(d, drv+"/")) {
					t.Errorf("%s pulls in %s", pkg, d)
				}
			}
		}
	}
}

// TestClientIsStandardLibraryOnly lists, with go list -deps, what
// idemclient brings into a binary: the standard library and nothing else,
// so that any Go client can take it.
func TestClientIsStandardLibraryOnly(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to list the dependencies with: %v", err)
	}
	const pkg = "github.com/idemgo/idem/idemclient"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	if got := strings.Fields(string(out)); len(got) != 1 || got[0] != pkg {
		t.Errorf("%s and its dependencies outside the standard library: %q, want the package alone", pkg, got)
	}
}

// TestRootModuleRequiresNothing reads the root's go.mod, which a service's
// module graph takes in whole when it requires idem: it must require no
// module, so that a service that imports idem keeps the versions of its
// driver, of sqlmock and of everything else that it pinned itself
// (proving/check-consumer builds such a service). What needs a driver
// lives in a module of its own (docs/architecture.md, "The modules").
func TestRootModuleRequiresNothing(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to read go.mod with: %v", err)
	}
	out, err := exec.Command("go", "mod", "edit", "-json").Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Module  struct{ Path string }
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Module.Path != "github.com/idemgo/idem" {
		t.Fatalf("go.mod is the module %q's, want the root's", mod.Module.Path)
	}
	for _, r := range mod.Require {
		t.Errorf("the root module requires %s %s", r.Path, r.Version)
	}
}
