package idemgrpc_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
)

// envPostgres names the PostgreSQL server of the tests, as in the rest of
// the repository: postgres://user@host:port/db?sslmode=disable. scripts/test
// sets it.
const envPostgres = "IDEM_POSTGRES_DSN"

// sqliteParams are the connection settings the SQLite dialect asks for.
// The busy timeout, 10 s, is how long a transaction waits at BEGIN for the
// write lock: the tests that hold it on purpose let go within 300 ms, so a
// waiter gets it with seconds to spare on a loaded machine.
const sqliteParams = "_txlock=immediate&_pragma=busy_timeout(10000)"

// target is a database the tests run against.
type target struct {
	name    string
	dialect idem.Dialect
	// oneWriter is SQLite's: a second transaction waits at BEGIN until
	// the first ends, so a key is never seen in flight.
	oneWriter bool
	open      func(t *testing.T) *sql.DB
}

func sqliteTarget() target {
	return target{name: "sqlite", dialect: idem.SQLite(), oneWriter: true, open: func(t *testing.T) *sql.DB {
		return openDB(t, "sqlite", "file:"+filepath.Join(t.TempDir(), "idem.db")+"?"+sqliteParams)
	}}
}

func postgresTarget(dsn string) target {
	return target{name: "postgres", dialect: idem.Postgres(), open: func(t *testing.T) *sql.DB {
		return openDB(t, "postgres", dsn)
	}}
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// forEach runs f on SQLite, and on PostgreSQL when envPostgres names a
// server; otherwise the PostgreSQL subtest is skipped and says how to run
// it.
func forEach(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { f(t, sqliteTarget()) })
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv(envPostgres)
		if dsn == "" {
			t.Skip(envPostgres + " is not set: set it to postgres://user@host:port/db?sslmode=disable to run on PostgreSQL (scripts/test does)")
		}
		f(t, postgresTarget(dsn))
	})
}

// env is one test's database, with a store on a table of its own and an
// effect table, both dropped at the end of the test.
type env struct {
	tg      target
	db      *sql.DB
	store   *idem.Store
	table   string
	effects string
}

func setup(t *testing.T, tg target, opts ...idem.Option) *env {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b[:])
	e := &env{tg: tg, db: tg.open(t), table: "idemgrpc_" + suffix, effects: "effects_" + suffix}
	store, err := idem.New(tg.dialect, append([]idem.Option{idem.WithTable(e.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	ctx := context.Background()
	if err := store.Migrate(ctx, e.db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	e.dropAtEnd(t, e.table)
	if _, err := e.db.ExecContext(ctx, "CREATE TABLE "+e.effects+" (k TEXT NOT NULL, note TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	e.dropAtEnd(t, e.effects)
	return e
}

func (e *env) dropAtEnd(t *testing.T, table string) {
	t.Cleanup(func() {
		if _, err := e.db.ExecContext(context.Background(), "DROP TABLE "+table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

// insertEffect writes an effect row for key with note, in tx.
func (e *env) insertEffect(ctx context.Context, tx *sql.Tx, key, note string) error {
	d := e.tg.dialect
	_, err := tx.ExecContext(ctx, "INSERT INTO "+e.effects+" (k, note) VALUES ("+d.Placeholder(1)+", "+d.Placeholder(2)+")", key, note)
	return err
}

// effectCount counts the effect rows of key.
func (e *env) effectCount(t *testing.T, key string) int {
	t.Helper()
	var n int
	q := "SELECT COUNT(*) FROM " + e.effects + " WHERE k = " + e.tg.dialect.Placeholder(1)
	if err := e.db.QueryRowContext(context.Background(), q, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
