package dialect_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/idemgo/idem/dialect"
)

// TestSQLiteShardColumnCheckByAffinity runs the SQLite dialect's
// ShardColumnCheck on tables whose shard_key is declared with many types:
// a column is accepted for a kind when SQLite gives its declared type the
// affinity of the type that the dialect declares for the kind (INTEGER,
// TEXT or BLOB), as SQLite's rules derive it, whatever the type's name;
// any other is refused, and so is a table without the column.
func TestSQLiteShardColumnCheckByAffinity(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "check.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	int64Kind := dialect.ShardKind{Type: dialect.ShardInt64}
	textKind := dialect.ShardKind{Type: dialect.ShardText, MaxBytes: 8}
	bytesKind := dialect.ShardKind{Type: dialect.ShardBytes, MaxBytes: 8}
	uuidKind := dialect.ShardKind{Type: dialect.ShardUUID}
	for i, c := range []struct {
		declared string // the declared type of shard_key
		fits     []dialect.ShardKind
	}{
		{"INTEGER", []dialect.ShardKind{int64Kind}},
		{"BIGINT", []dialect.ShardKind{int64Kind}},
		{"bigint", []dialect.ShardKind{int64Kind}},
		{"INT", []dialect.ShardKind{int64Kind}},
		{"UNSIGNED BIG INT", []dialect.ShardKind{int64Kind}},
		{"FLOATING POINT", []dialect.ShardKind{int64Kind}}, // INT before all: SQLite's own example
		{"CHARINT", []dialect.ShardKind{int64Kind}},
		{"TEXT", []dialect.ShardKind{textKind, uuidKind}},
		{"VARCHAR(8)", []dialect.ShardKind{textKind, uuidKind}},
		{"character varying(36)", []dialect.ShardKind{textKind, uuidKind}},
		{"NVARCHAR(100)", []dialect.ShardKind{textKind, uuidKind}},
		{"CLOB", []dialect.ShardKind{textKind, uuidKind}},
		{"BLOB", []dialect.ShardKind{bytesKind}},
		{"", []dialect.ShardKind{bytesKind}},
		{"NUMERIC", nil},
		{"DECIMAL(20)", nil},
		{"REAL", nil},
		{"DOUBLE", nil},
		{"BOOLEAN", nil},
	} {
		table := "t" + strconv.Itoa(i)
		if _, err := db.ExecContext(ctx, `CREATE TABLE "`+table+`" (shard_key `+c.declared+` NOT NULL, key BLOB NOT NULL, PRIMARY KEY (shard_key, key))`); err != nil {
			t.Fatalf("shard_key %s: %v", c.declared, err)
		}
		for _, kind := range []dialect.ShardKind{int64Kind, textKind, bytesKind, uuidKind} {
			want := 0
			for _, f := range c.fits {
				if f == kind {
					want = 1
				}
			}
			q, _ := dialect.SQLite().(dialect.ShardColumn).ShardColumnCheck(table, kind)
			var columns, fitting int
			if err := db.QueryRowContext(ctx, q).Scan(&columns, &fitting); err != nil {
				t.Fatalf("shard_key %s, %v: %v", c.declared, kind, err)
			}
			if columns != 1 || fitting != want {
				t.Errorf("shard_key %q for %v: %d columns, %d fitting; want 1, %d", c.declared, kind, columns, fitting, want)
			}
		}
	}

	if _, err := db.ExecContext(ctx, `CREATE TABLE plain (key BLOB NOT NULL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	q, _ := dialect.SQLite().(dialect.ShardColumn).ShardColumnCheck("plain", int64Kind)
	var columns, fitting int
	if err := db.QueryRowContext(ctx, q).Scan(&columns, &fitting); err != nil || columns != 0 || fitting != 0 {
		t.Errorf("a table without shard_key: %d columns, %d fitting, %v; want 0, 0", columns, fitting, err)
	}
}
