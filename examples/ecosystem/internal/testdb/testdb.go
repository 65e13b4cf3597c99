// Package testdb opens the SQLite databases that the examples run on, with
// the settings the SQLite dialect asks for, so that the examples need no
// server.
package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // registers "sqlite"; the dialect reads its error codes

	"github.com/idemgo/idem"
)

// DSN returns the data source name of the SQLite file at path, for
// modernc.org/sqlite. _txlock=immediate makes every transaction take the
// write lock at BEGIN, so that two claims of one key queue there instead of
// failing at their first write; busy_timeout is how long BEGIN waits.
func DSN(path string, busyTimeoutMillis int) string {
	return fmt.Sprintf("file:%s?_txlock=immediate&_pragma=busy_timeout(%d)", path, busyTimeoutMillis)
}

// DB is a database in a temporary directory of its own, with an orders table
// and the Store's table.
type DB struct {
	*sql.DB
	// Path is the database file, for opening more handles on it.
	Path string
	dir  string
}

// Open creates a database in a new temporary directory, with an orders
// table (id INTEGER PRIMARY KEY, item TEXT NOT NULL) and the table of
// idem's default Store. Close removes the directory.
func Open(ctx context.Context) (*DB, error) {
	dir, err := os.MkdirTemp("", "idem-ecosystem")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "shop.db")
	sqldb, err := sql.Open("sqlite", DSN(path, 5000))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	db := &DB{DB: sqldb, Path: path, dir: dir}
	if err := db.setUp(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func (db *DB) setUp(ctx context.Context) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		return err
	}
	store, err := idem.New(idem.SQLite())
	if err != nil {
		return err
	}
	return store.Migrate(ctx, db.DB)
}

// Close closes the database and removes its directory.
func (db *DB) Close() error {
	err := db.DB.Close()
	if rerr := os.RemoveAll(db.dir); err == nil {
		err = rerr
	}
	return err
}

// Count returns the number of rows in table, a name the caller controls.
func (db *DB) Count(ctx context.Context, table string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n)
	return n, err
}

// OpenT is Open for a test: it fails the test on an error and closes the
// database when the test ends.
func OpenT(t testing.TB) *DB {
	t.Helper()
	db, err := Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// StoreT makes a SQLite Store with opts for a test. The table exists
// already: Open made it.
func StoreT(t testing.TB, opts ...idem.Option) *idem.Store {
	t.Helper()
	store, err := idem.New(idem.SQLite(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// CountT is Count for a test.
func (db *DB) CountT(t testing.TB, table string) int {
	t.Helper()
	n, err := db.Count(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
