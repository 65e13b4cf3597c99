package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/placement"
)

// Env is one test's store, on a table of its own, and an effect table
// beside it, both dropped at the end of the test.
type Env struct {
	Dialect idem.Dialect
	DB      *sql.DB
	DSN     string // what DB was opened with, where the Env knows it (Target.Setup)
	Store   *idem.Store
	Table   string // the store's table
	Effects *Effects
}

// Setup makes a store through d with opts on a new table in db, migrates
// it, and creates an effect table; both are dropped at the end of t. In a
// database of a Distributed target, it distributes both.
func Setup(t testing.TB, d idem.Dialect, db *sql.DB, opts ...idem.Option) *Env {
	t.Helper()
	suffix := RandomName()
	e := &Env{Dialect: d, DB: db, Table: "idem_" + suffix}
	store, err := idem.New(d, append([]idem.Option{idem.WithTable(e.Table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.Store = store
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	dropAtEnd(t, db, e.Table)
	if placement.Sharded(d) {
		placement.AddVindex(t, db, e.Table, "`key`")
	}
	if d.Name() == "mysql" {
		// The MySQL dialect's Migrate creates the claim's procedures too.
		DropProceduresAtEnd(t, db, e.Table)
	}
	e.Effects = NewEffects(t, d, db, "effects_"+suffix)
	if IsDistributed(db) {
		Distribute(t, db, e.Table, e.Effects.Table)
	}
	return e
}

// RandomName returns 12 random hex digits, for names that no other test
// uses.
func RandomName() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// Effect returns a Func that writes one effect row for key and answers resp.
func (e *Env) Effect(key string, resp idem.Response) idem.Func {
	return e.Effects.Func(key, resp)
}

// EffectCount counts the effect rows of key.
func (e *Env) EffectCount(t testing.TB, key string) int {
	t.Helper()
	return e.Effects.Count(t, key)
}

// Begin starts a transaction with opts, rolled back at the end of the test
// if still open.
func (e *Env) Begin(t testing.TB, opts *sql.TxOptions) *sql.Tx {
	t.Helper()
	tx, err := e.DB.BeginTx(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// Do runs Do in a transaction of its own, then commits it when commit is
// true and Do succeeded, and rolls it back otherwise.
func (e *Env) Do(t testing.TB, key string, hash []byte, fn idem.Func, commit bool) (idem.Result, error) {
	t.Helper()
	tx := e.Begin(t, nil)
	res, err := e.Store.Do(context.Background(), tx, key, hash, fn)
	if err == nil && commit {
		if cerr := tx.Commit(); cerr != nil {
			t.Fatalf("commit: %v", cerr)
		}
	} else if rerr := tx.Rollback(); rerr != nil {
		t.Fatalf("rollback: %v", rerr)
	}
	return res, err
}

// Hold claims key with hash, for an Effect answering resp, in a transaction
// that it leaves open, like a request still being served.
func (e *Env) Hold(t testing.TB, key string, hash []byte, resp idem.Response) *sql.Tx {
	t.Helper()
	tx := e.Begin(t, nil)
	res, err := e.Store.Do(context.Background(), tx, key, hash, e.Effect(key, resp))
	if err != nil {
		t.Fatalf("Do: %v, want outcome %v", err, idem.Claimed)
	}
	if res.Outcome != idem.Claimed {
		t.Fatalf("outcome = %v, want %v", res.Outcome, idem.Claimed)
	}
	return tx
}

// ClearIncarnation sets the incarnation of the record of key to zero, as
// a record holds that was created before its table had the column
// (docs/operations.md, "Upgrading the table"), for a store without a shard
// column.
func (e *Env) ClearIncarnation(t testing.TB, key string) {
	t.Helper()
	column := "key"
	switch e.Dialect.Name() {
	case "mysql", "mariadb", "tidb", "vitess":
		column = "`key`"
	}
	res, err := e.DB.ExecContext(context.Background(), "UPDATE "+e.Table+" SET incarnation = 0 WHERE "+column+" = "+e.Dialect.Placeholder(1), []byte(key))
	if err != nil {
		t.Fatalf("clear the incarnation of %q: %v", key, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("clear the incarnation of %q: %d rows, %v; want its record", key, n, err)
	}
}
