package idem_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

var update = flag.Bool("update", false, "rewrite the migration files in migrations/ from Store.Schema")

// migrationFiles returns the files, by path, that migration tools read to
// create the default table for d: goose's one file with Up and Down
// sections, and golang-migrate's up and down pair.
func migrationFiles(d idem.Dialect) (map[string]string, error) {
	store, err := idem.New(d)
	if err != nil {
		return nil, err
	}
	var up strings.Builder
	for _, stmt := range store.Schema() {
		up.WriteString(stmt + ";\n\n")
	}
	down := "DROP TABLE " + idem.DefaultTable + ";\n"
	const header = "-- The table of github.com/idemgo/idem, as Store.Schema gives it for the %s dialect.\n-- migrations_test.go checks that it stays so; go test -run TestMigrationFiles -update rewrites it.\n\n"
	note := strings.Replace(header, "%s", d.Name(), 1)
	dir := filepath.Join("migrations", d.Name())
	return map[string]string{
		filepath.Join(dir, "goose", "00001_create_idempotency_keys.sql"): note +
			"-- +goose Up\n" + up.String() + "-- +goose Down\n" + down,
		filepath.Join(dir, "migrate", "000001_create_idempotency_keys.up.sql"):   note + up.String(),
		filepath.Join(dir, "migrate", "000001_create_idempotency_keys.down.sql"): note + down,
	}, nil
}

// TestMigrationFiles checks that the schema files for goose and
// golang-migrate are exactly what Store.Schema says.
func TestMigrationFiles(t *testing.T) {
	for _, d := range []idem.Dialect{idem.Postgres(), idem.MySQL(), idem.SQLite()} {
		files, err := migrationFiles(d)
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range files {
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v (go test -run TestMigrationFiles -update writes it)", err)
				continue
			}
			if string(got) != want {
				t.Errorf("%s differs from Store.Schema; go test -run TestMigrationFiles -update rewrites it", path)
			}
		}
	}
}
