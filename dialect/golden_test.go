package dialect_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/dialect"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with what the dialects write now")

// goldenTable and goldenLockTimeout are the table and the lock timeout that
// the golden files are written for: a name with a schema, so that quoting
// shows, and a timeout that is not the default.
const (
	goldenTable       = "app.idem_keys"
	goldenLockTimeout = 2500 * time.Millisecond
)

// TestStatementsGolden pins what each built-in dialect sends and creates,
// for one table, in a golden file per dialect under testdata/: its
// capabilities, its Schema, its Upgrades, every statement of Statements
// (Run's included), and, for each kind of shard column, the schema, the
// check of the column and the statements of such a table. A change to a
// dialect's SQL fails this test until the golden file is rewritten
// (go test ./dialect -run TestStatementsGolden -update), so that the change
// shows in review as a diff of the SQL itself. It needs no server: that
// the statements work is shown by the tests on the servers.
func TestStatementsGolden(t *testing.T) {
	kinds := []dialect.ShardKind{
		{Type: dialect.ShardInt64},
		{Type: dialect.ShardText, MaxBytes: 64},
		{Type: dialect.ShardBytes, MaxBytes: 16},
		{Type: dialect.ShardUUID},
	}
	for _, d := range []dialect.Dialect{dialect.Postgres(), dialect.MySQL(), dialect.MariaDB(), dialect.TiDB(), dialect.Vitess(), dialect.SQLite()} {
		t.Run(d.Name(), func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, "-- The %s dialect on table %s, lock timeout %v. Written by\n", d.Name(), goldenTable, goldenLockTimeout)
			b.WriteString("-- go test ./dialect -run TestStatementsGolden -update\n")
			fmt.Fprintf(&b, "\n-- Capabilities: %+v\n", dialect.CapabilitiesOf(d))
			writeList(&b, "Schema", d.Schema(goldenTable))
			for i, u := range d.Upgrades(goldenTable) {
				writeSQL(&b, fmt.Sprintf("Upgrades[%d].Check", i), u.Check)
				writeSQL(&b, fmt.Sprintf("Upgrades[%d].Apply", i), u.Apply)
			}
			writeStruct(&b, "Statements", reflect.ValueOf(d.Statements(goldenTable, goldenLockTimeout)))
			if sc, ok := d.(dialect.ShardColumn); ok {
				for _, k := range kinds {
					fmt.Fprintf(&b, "\n-- ===== a shard column of kind %v\n", k)
					writeList(&b, "ShardColumnSchema", sc.ShardColumnSchema(goldenTable, k))
					q, typ := sc.ShardColumnCheck(goldenTable, k)
					writeSQL(&b, "ShardColumnCheck (type "+typ+")", q)
					writeStruct(&b, "ShardColumnStatements", reflect.ValueOf(sc.ShardColumnStatements(goldenTable, k, goldenLockTimeout)))
				}
			}
			compareGolden(t, filepath.Join("testdata", d.Name()+".sql"), b.String())
		})
	}
}

// writeStruct writes every non-empty string field of v, a struct, under
// the field's name, and the fields of the structs it holds, such as
// Statements.Run, under their dotted names; the other fields as Go prints
// them.
func writeStruct(b *strings.Builder, name string, v reflect.Value) {
	for i := range v.NumField() {
		f, field := v.Field(i), name+"."+v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			writeSQL(b, field, f.String())
		case reflect.Struct:
			writeStruct(b, field, f)
		default:
			fmt.Fprintf(b, "\n-- %s: %v\n", field, f.Interface())
		}
	}
}

// writeList writes each statement of stmts under name and its index.
func writeList(b *strings.Builder, name string, stmts []string) {
	for i, s := range stmts {
		writeSQL(b, fmt.Sprintf("%s[%d]", name, i), s)
	}
}

// writeSQL writes one statement under its name; an empty one is left out,
// as a dialect leaves out what it does not have.
func writeSQL(b *strings.Builder, name, sql string) {
	if sql == "" {
		return
	}
	fmt.Fprintf(b, "\n-- %s\n%s\n", name, strings.TrimSpace(sql))
}

// compareGolden fails t where got is not the content of the golden file
// path, naming the first line that differs, or rewrites the file with
// -update.
func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: write it with go test ./dialect -run TestStatementsGolden -update", err)
	}
	if got == string(want) {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s:%d differs from what the dialect writes now:\n  golden: %q\n  now:    %q\nIf the change is meant, rewrite the file (go test ./dialect -run TestStatementsGolden -update) and review its diff.", path, i+1, wl, gl)
		}
	}
}
