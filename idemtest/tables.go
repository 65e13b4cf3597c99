package idemtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/placement"
)

// The tables of a property, made through its *sql.DB and dropped at the
// end of its test: the Store's own, the effects that its requests write
// beside it, and, for a Store with a shard column, the customers' orders in
// place of the effects. internal/placement shards or distributes them where the
// database is sharded (Vitess) or distributed (Citus).

// storeTable is a Store on a table of its own, migrated.
type storeTable struct {
	store *idem.Store
	table string
}

// newStore makes a Store through d with opts on table in db, migrates it,
// and drops the table at the end of t.
func newStore(t *testing.T, d idem.Dialect, db *sql.DB, table string, opts ...idem.Option) storeTable {
	t.Helper()
	store, err := idem.New(d, append([]idem.Option{idem.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	dropAtEnd(t, db, table)
	if d.Name() == "mysql" {
		dropProceduresAtEnd(t, db, table)
	}
	return storeTable{store: store, table: table}
}

// dropAtEnd drops table at the end of t.
func dropAtEnd(t *testing.T, db *sql.DB, table string) {
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE "+table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

// dropProceduresAtEnd drops, at the end of t, the procedures of table's
// claim that the MySQL dialect's Migrate makes beside it, of this version
// and of earlier ones.
func dropProceduresAtEnd(t *testing.T, db *sql.DB, table string) {
	t.Cleanup(func() {
		for _, suffix := range []string{"_claim", "_claim2", "_claim_int64", "_claim_bytes"} {
			if _, err := db.ExecContext(context.Background(), "DROP PROCEDURE IF EXISTS "+table+suffix); err != nil {
				t.Errorf("drop %s%s: %v", table, suffix, err)
			}
		}
	})
}

// randomName returns 12 random hex digits, for names that no other test
// uses.
func randomName() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand's Read never fails
	return hex.EncodeToString(b[:])
}

// effectKey is how the tables of effects and orders store a request's key:
// as its hex, which a text column of any collation holds and compares byte
// for byte, and whose longest, for idem.MaxStoredKeyBytes, fits their
// VARCHAR(1100).
func effectKey(key string) string { return hex.EncodeToString([]byte(key)) }

// effects is a table of the effects that the properties' functions have:
// one row per run, with the key it ran for and a note, in plain SQL:
// (k VARCHAR(1100) NOT NULL, note TEXT NOT NULL), k the effectKey.
//
// Where the Store's table is sharded or distributed by key (internal/placement),
// the effects also hold the key itself, rk, by which they are placed with
// the key's record, so that a request's transaction stays on one shard; k
// is then made from rk, and insertSQL writes rk from the same hex argument,
// so that the properties' statements are the same there.
type effects struct {
	table string
	d     idem.Dialect
	db    *sql.DB
	// raw says that the table holds the key itself, rk: as VARBINARY on
	// Vitess, as bytea on Citus, whose co-location needs distribution
	// columns of one type, and idem's key is bytea.
	raw bool
}

// newEffects creates the effect table named table in db, placed as
// internal/placement says, and drops it at the end of t.
func newEffects(t *testing.T, s *suite, table string) *effects {
	t.Helper()
	fx := &effects{table: table, d: s.d, db: s.db, raw: placement.Sharded(s.d) || s.distributed}
	ddl := "CREATE TABLE " + table + " (k VARCHAR(1100) NOT NULL, note TEXT NOT NULL)"
	switch {
	case placement.Sharded(s.d):
		ddl = "CREATE TABLE " + table + " (rk VARBINARY(550) NOT NULL, k VARCHAR(1100) AS (LOWER(HEX(rk))) STORED NOT NULL, note TEXT NOT NULL)"
	case fx.raw:
		ddl = "CREATE TABLE " + table + " (rk bytea NOT NULL, k text GENERATED ALWAYS AS (encode(rk, 'hex')) STORED NOT NULL, note text NOT NULL)"
	}
	if _, err := s.db.ExecContext(context.Background(), ddl); err != nil {
		t.Fatal(err)
	}
	dropAtEnd(t, s.db, table)
	if placement.Sharded(s.d) {
		placement.AddVindex(t, s.db, table, "rk")
	}
	return fx
}

// insertSQL writes an effect row: its arguments are the effectKey of the
// key, and the note.
func (fx *effects) insertSQL() string {
	switch {
	case placement.Sharded(fx.d):
		// vtgate computes the shard from UNHEX of the argument.
		return "INSERT INTO " + fx.table + " (rk, note) VALUES (UNHEX(?), ?)"
	case fx.raw:
		// Citus evaluates decode on the coordinator and routes the row.
		return "INSERT INTO " + fx.table + " (rk, note) VALUES (decode($1, 'hex'), $2)"
	}
	return "INSERT INTO " + fx.table + " (k, note) VALUES (" + fx.d.Placeholder(1) + ", " + fx.d.Placeholder(2) + ")"
}

// count counts the effect rows of key, on the key's shard alone where the
// table is placed by it.
func (fx *effects) count(t *testing.T, key string) int {
	t.Helper()
	where := " WHERE k = " + fx.d.Placeholder(1)
	switch {
	case placement.Sharded(fx.d):
		where = " WHERE rk = UNHEX(?)"
	case fx.raw:
		where = " WHERE rk = decode($1, 'hex')"
	}
	var n int
	if err := fx.db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+fx.table+where, effectKey(key)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// shardKind is the kind of the shard column of the stores whose requests
// place orders (shardEnv): the values are the customers' ids, of
// customerType on every built-in dialect.
var shardKind = idem.ShardInt64()

// customerType is the SQL type of the orders' customer_id: that of a shard
// column of shardKind on every built-in database, as Citus's co-location
// and Vitess's vindexes need.
const customerType = "BIGINT"

// orders is a table of customers' orders, placed by customer_id as a real
// service's effects are, not by the idempotency key: the effect table of a
// store with a shard column of shardKind, whose records hold the customer
// id in shard_key. Both tables are placed by customer (internal/placement), so
// that a customer's records and orders live on one shard.
type orders struct {
	table string
	d     idem.Dialect
	db    *sql.DB
}

// newOrders creates the orders named table in db, dropped at the end of t.
func newOrders(t *testing.T, s *suite, table string) *orders {
	t.Helper()
	o := &orders{table: table, d: s.d, db: s.db}
	if _, err := s.db.ExecContext(context.Background(), "CREATE TABLE "+table+" (customer_id "+customerType+" NOT NULL, k VARCHAR(1100) NOT NULL, note TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	dropAtEnd(t, s.db, table)
	return o
}

// insertSQL writes an order: its arguments are the customer id and the
// effectKey of the key.
func (o *orders) insertSQL() string {
	return "INSERT INTO " + o.table + " (customer_id, k, note) VALUES (" + o.d.Placeholder(1) + ", " + o.d.Placeholder(2) + ", 'done')"
}

// count counts customer's orders for key, on the customer's shard alone.
func (o *orders) count(t *testing.T, customer int64, key string) int {
	t.Helper()
	var n int
	err := o.db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+o.table+" WHERE customer_id = "+
		o.d.Placeholder(1)+" AND k = "+o.d.Placeholder(2), customer, effectKey(key)).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
