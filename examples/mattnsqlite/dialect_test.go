package mattnsqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/mattnsqlite"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/codec"
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
// version did, with Do's columns only, and a record in it as that version
// wrote it, and shows that Migrate adds the columns of multi-step requests
// and the incarnation through the dialect's Upgrades, keeps the record that
// was there, which reads incarnation 0, and that Run then works on the
// table.
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
	if _, err := do(t, db, store, respond); err == nil {
		t.Fatal("Do on the first table succeeded, want the missing columns' error")
	}
	// The record that the first version wrote, with the response that
	// respond answers.
	header := codec.EncodeHeader(resp.Header)
	sum := codec.Checksum([]byte("order-1"), hash, int64(resp.Status), header, resp.Body)
	now := time.Now()
	if _, err := db.ExecContext(ctx, `INSERT INTO keys (key, request_hash, created_at, expires_at, status, header, body, checksum, token)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)`, []byte("order-1"), hash, now.UnixMicro(), now.Add(time.Hour).UnixMicro(), resp.Status, header, resp.Body, sum[:]); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second Migrate finds nothing to do
		if err := store.Migrate(ctx, db); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('keys') WHERE name IN ('phase', 'lease_until', 'resume_backoff', 'incarnation')`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("columns of multi-step requests and the incarnation after Migrate: %d, %v; want 4", n, err)
	}
	if res, err := do(t, db, store, respond); err != nil || res.Outcome != idem.Replay || res.Incarnation != 0 {
		t.Errorf("Do after Migrate: %v, %v, incarnation %d; want the record from before, replayed, with incarnation 0", res.Outcome, err, res.Incarnation)
	}
	res, err := store.Run(ctx, db, nil, "k", hash, idem.Final("f", respond))
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("Run after Migrate: %v, %v; want Claimed", res.Outcome, err)
	}
}
