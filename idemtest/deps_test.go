package idemtest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoDriverDependency shows that idemtest, without its tests, imports no
// SQL driver: a test binary of a service that uses one driver must not link
// the others through idemtest, and the conflict errors of the Mock are
// idemtest's own for that reason.
func TestNoDriverDependency(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the dependencies with: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	drivers := []string{
		"github.com/go-sql-driver/mysql",
		"github.com/lib/pq",
		"github.com/jackc/pgx",
		"modernc.org/sqlite",
		"github.com/mattn/go-sqlite3",
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, pkg := range pkgs {
		for _, d := range drivers {
			if pkg == d || strings.HasPrefix(pkg, d+"/") {
				t.Errorf("idemtest depends on the driver package %s", pkg)
			}
		}
		if strings.Contains(pkg, "sqlite") {
			t.Errorf("idemtest depends on %s, a SQLite package", pkg)
		}
	}
}
