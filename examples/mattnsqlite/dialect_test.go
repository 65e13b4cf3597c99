package mattnsqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/mattnsqlite"
	"github.com/idemgo/idem/idemtest"
)

func TestDialect(t *testing.T) {
	idemtest.TestDialect(t, mattnsqlite.Dialect(), func(t *testing.T) *sql.DB {
		path := filepath.Join(t.TempDir(), "idem.db")
		db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_busy_timeout=10000&_journal_mode=WAL")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}

// TestMigrateUpgradesFirstTable makes the table as the dialect's first
// version did, with Do's columns only, and shows that Migrate adds the
// columns of multi-step requests through the dialect's Upgrades, keeps the
// record that was there, and that Run then works on the table.
func TestMigrateUpgradesFirstTable(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "idem.db")+"?_txlock=immediate&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE keys (key BLOB NOT NULL PRIMARY KEY, request_hash BLOB NOT NULL, created_at INTEGER NOT NULL,
			expires_at INTEGER NOT NULL, status INTEGER, header BLOB, body BLOB, checksum BLOB, token INTEGER NOT NULL DEFAULT 0)`,
		`CREATE INDEX keys_expires_at ON keys (expires_at)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	store, err := idem.New(mattnsqlite.Dialect(), idem.WithTable("keys"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := do(t, db, store, respond); err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("Do on the first table: %v, %v", res.Outcome, err)
	}
	if _, err := store.Run(ctx, db, nil, "k", hash, idem.Final("f", respond)); err == nil {
		t.Fatal("Run on the first table succeeded, want the missing columns' error")
	}
	for range 2 { // a second Migrate finds nothing to do
		if err := store.Migrate(ctx, db); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('keys') WHERE name IN ('phase', 'lease_until', 'resume_backoff')`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("columns of multi-step requests after Migrate: %d, %v; want 3", n, err)
	}
	if res, err := do(t, db, store, respond); err != nil || res.Outcome != idem.Replay {
		t.Errorf("Do after Migrate: %v, %v; want the record from before, replayed", res.Outcome, err)
	}
	res, err := store.Run(ctx, db, nil, "k", hash, idem.Final("f", respond))
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("Run after Migrate: %v, %v; want Claimed", res.Outcome, err)
	}
}
