package dbtest

import (
	"context"
	"database/sql"
	"encoding/hex"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/placement"
)

// Effects is a table of the effects that a test's functions have: one row
// per run, with the key it ran for and a note. It has one shape, in plain
// SQL, on every database, that of idemtest's effects: the key is
// stored as its hex (EffectKey), which a text column of any collation holds
// and compares byte for byte, and whose longest, for idem.MaxStoredKeyBytes, fits
// the column.
//
// On a sharded Vitess keyspace the table also holds the key itself, rk, by
// which it is sharded as idem's table is by its key, so that a request's
// effect goes to the shard of its record and the request's transaction
// stays on one shard. k is then made from rk, and InsertSQL writes rk from
// the same hex argument, so that the statements of the tests are the same
// there. On Citus (a Distributed target) it holds rk too, as bytea, by
// which it is distributed in the co-location group of idem's table, whose
// key is bytea: Citus co-locates only distribution columns of one type.
type Effects struct {
	Table   string
	dialect idem.Dialect
	db      *sql.DB
	raw     bool // the table holds the key itself, rk, and k is made from it
}

// Execer is a database or a transaction.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// EffectKey is how the effect table stores key.
func EffectKey(key string) string { return hex.EncodeToString([]byte(key)) }

// NewEffects creates an effect table named table in db, through d, and drops
// it at the end of t.
func NewEffects(t testing.TB, d idem.Dialect, db *sql.DB, table string) *Effects {
	t.Helper()
	fx := OpenEffects(d, db, table)
	ddl := "CREATE TABLE " + table + " (k VARCHAR(1100) NOT NULL, note TEXT NOT NULL)"
	switch {
	case placement.Sharded(d):
		ddl = "CREATE TABLE " + table + " (rk VARBINARY(550) NOT NULL, k VARCHAR(1100) AS (LOWER(HEX(rk))) STORED NOT NULL, note TEXT NOT NULL)"
	case fx.raw:
		ddl = "CREATE TABLE " + table + " (rk bytea NOT NULL, k text GENERATED ALWAYS AS (encode(rk, 'hex')) STORED NOT NULL, note text NOT NULL)"
	}
	if _, err := db.ExecContext(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	dropAtEnd(t, db, table)
	if placement.Sharded(d) {
		placement.AddVindex(t, db, table, "rk")
	}
	return fx
}

// OpenEffects is the effect table named table that NewEffects made, for a
// process of a test's other than the one that made it.
func OpenEffects(d idem.Dialect, db *sql.DB, table string) *Effects {
	return &Effects{Table: table, dialect: d, db: db, raw: placement.Sharded(d) || IsDistributed(db)}
}

// Placeholder is the dialect's n-th bind marker, for statements on the
// effect table.
func (fx *Effects) Placeholder(n int) string { return fx.dialect.Placeholder(n) }

// dropAtEnd drops table at the end of t.
func dropAtEnd(t testing.TB, db *sql.DB, table string) {
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE "+table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

// DropProceduresAtEnd drops, at the end of t, the procedures of table's
// claim that the MySQL dialect's Migrate makes beside it: the first, for
// binaries of earlier versions, and the current one.
func DropProceduresAtEnd(t testing.TB, db *sql.DB, table string) {
	t.Cleanup(func() {
		for _, suffix := range []string{"_claim", "_claim2", "_claim_int64", "_claim_bytes"} {
			if _, err := db.ExecContext(context.Background(), "DROP PROCEDURE IF EXISTS "+table+suffix); err != nil {
				t.Errorf("drop %s%s: %v", table, suffix, err)
			}
		}
	})
}

// InsertSQL is the statement that Insert sends: its arguments are the
// EffectKey of the key, and the note.
func (fx *Effects) InsertSQL() string {
	switch {
	case placement.Sharded(fx.dialect):
		// vtgate computes the shard from UNHEX of the argument.
		return "INSERT INTO " + fx.Table + " (rk, note) VALUES (UNHEX(?), ?)"
	case fx.raw:
		// Citus evaluates decode on the coordinator and routes the row.
		return "INSERT INTO " + fx.Table + " (rk, note) VALUES (decode($1, 'hex'), $2)"
	}
	return "INSERT INTO " + fx.Table + " (k, note) VALUES (" + fx.dialect.Placeholder(1) + ", " + fx.dialect.Placeholder(2) + ")"
}

// Insert writes an effect row for key with note.
func (fx *Effects) Insert(ctx context.Context, ex Execer, key, note string) error {
	_, err := ex.ExecContext(ctx, fx.InsertSQL(), EffectKey(key), note)
	return err
}

// Func returns a Func that writes one effect row for key, noted "done", and
// answers resp.
func (fx *Effects) Func(key string, resp idem.Response) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if err := fx.Insert(ctx, tx, key, "done"); err != nil {
			return idem.Response{}, err
		}
		return resp, nil
	}
}

// Count counts the effect rows of key.
func (fx *Effects) Count(t testing.TB, key string) int {
	t.Helper()
	switch {
	case placement.Sharded(fx.dialect):
		// On the key's shard alone.
		return fx.count(t, " WHERE rk = UNHEX(?)", EffectKey(key))
	case fx.raw:
		return fx.count(t, " WHERE rk = decode($1, 'hex')", EffectKey(key))
	}
	return fx.count(t, " WHERE k = "+fx.dialect.Placeholder(1), EffectKey(key))
}

// Delete deletes the effect rows of key, as an operator who undid them
// would.
func (fx *Effects) Delete(t testing.TB, key string) {
	t.Helper()
	where := " WHERE k = " + fx.dialect.Placeholder(1)
	switch {
	case placement.Sharded(fx.dialect):
		where = " WHERE rk = UNHEX(?)" // on the key's shard alone
	case fx.raw:
		where = " WHERE rk = decode($1, 'hex')"
	}
	if _, err := fx.db.ExecContext(context.Background(), "DELETE FROM "+fx.Table+where, EffectKey(key)); err != nil {
		t.Fatal(err)
	}
}

// Total counts the effect rows of every key.
func (fx *Effects) Total(t testing.TB) int {
	t.Helper()
	return fx.count(t, "")
}

func (fx *Effects) count(t testing.TB, where string, args ...any) int {
	t.Helper()
	var n int
	if err := fx.db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+fx.Table+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Notes returns the notes of every effect row, by key.
func (fx *Effects) Notes(t testing.TB) map[string][]string {
	t.Helper()
	rows, err := fx.db.QueryContext(context.Background(), "SELECT k, note FROM "+fx.Table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	notes := make(map[string][]string)
	for rows.Next() {
		var k, note string
		if err := rows.Scan(&k, &note); err != nil {
			t.Fatal(err)
		}
		key, err := hex.DecodeString(k)
		if err != nil {
			t.Fatalf("effect row with key %q: %v", k, err)
		}
		notes[string(key)] = append(notes[string(key)], note)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return notes
}
