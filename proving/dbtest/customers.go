package dbtest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/placement"
)

// ShardKind is the kind of the shard column of the tests' stores that
// shard by customer (SetupByCustomer), whose type on every built-in
// dialect is CustomerType, the type of Orders' customer_id.
var ShardKind = idem.ShardInt64()

// CustomerType is the SQL type of Orders' customer_id: that of a shard
// column of ShardKind on every built-in database, as Citus's co-location
// and Vitess's vindexes need.
const CustomerType = "BIGINT"

// Orders is a table of orders of customers, sharded by customer_id as a
// real service's effects are, not by the idempotency key: the effect table
// of the tests of a store with a shard column (idem.WithShardColumn),
// whose records hold the customer id in shard_key. On Vitess both tables
// are sharded with the keyspace's xxhash vindex, idem's by shard_key and
// the orders by customer_id, so that a customer's records and orders live
// on one shard; on Citus, idem's table is distributed by shard_key and
// the orders by customer_id, and idem's by shard_key in the orders'
// co-location group.
type Orders struct {
	Table   string
	dialect idem.Dialect
	db      *sql.DB
}

// SetupByCustomer opens tg for t and makes a store with opts and a shard
// column of ShardKind on a table of its own, migrates it, and creates
// an Orders table beside it; both are sharded by customer as Orders says,
// and dropped at the end of t.
func (tg Target) SetupByCustomer(t testing.TB, opts ...idem.Option) (*Env, *Orders) {
	t.Helper()
	db, dsn := tg.OpenDSN(t)
	e, o := SetupByCustomer(t, tg.Dialect, db, opts...)
	e.DSN = dsn
	return e, o
}

// SetupByCustomer is Target.SetupByCustomer on db, a database that the
// caller opened: through d, on a Vitess keyspace or a Citus coordinator
// too, whose tables it shards as Orders says.
func SetupByCustomer(t testing.TB, d idem.Dialect, db *sql.DB, opts ...idem.Option) (*Env, *Orders) {
	t.Helper()
	ctx := context.Background()
	suffix := RandomName()
	e := newSharded(t, d, db, "idem_"+suffix, ShardKind, opts...)
	o := &Orders{Table: "orders_" + suffix, dialect: d, db: db}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+o.Table+" (customer_id "+CustomerType+" NOT NULL, k VARCHAR(1100) NOT NULL, note TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	dropAtEnd(t, db, o.Table)
	switch {
	case placement.Sharded(d):
		placement.AddVindex(t, db, e.Table, "shard_key")
		placement.AddVindex(t, db, o.Table, "customer_id")
	case IsDistributed(db):
		// The orders first, as a service's tables are there before
		// idem's: idem's table joins their co-location group.
		if _, err := db.ExecContext(ctx, `SELECT create_distributed_table($1, 'customer_id')`, o.Table); err != nil {
			t.Fatalf("distribute %s: %v", o.Table, err)
		}
		if _, err := db.ExecContext(ctx, `SELECT create_distributed_table($1, 'shard_key', colocate_with => $2)`, e.Table, o.Table); err != nil {
			t.Fatalf("distribute %s: %v", e.Table, err)
		}
	}
	return e, o
}

// SetupSharded opens no orders: it makes a store with opts and a shard
// column of kind on a table of its own in db, migrates it, and shards it by
// shard_key where the database is sharded (Vitess's xxhash vindex; on
// Citus, create_distributed_table), for the tests of shard values of any
// kind. The table is dropped at the end of t.
func SetupSharded(t testing.TB, d idem.Dialect, db *sql.DB, kind idem.ShardKind, opts ...idem.Option) *Env {
	t.Helper()
	e := newSharded(t, d, db, "idem_"+RandomName(), kind, opts...)
	switch {
	case placement.Sharded(d):
		placement.AddVindex(t, db, e.Table, "shard_key")
	case IsDistributed(db):
		if _, err := db.ExecContext(context.Background(), `SELECT create_distributed_table($1, 'shard_key')`, e.Table); err != nil {
			t.Fatalf("distribute %s: %v", e.Table, err)
		}
	}
	return e
}

// newSharded makes and migrates the store of SetupByCustomer and
// SetupSharded on table, dropped at the end of t with its procedures.
func newSharded(t testing.TB, d idem.Dialect, db *sql.DB, table string, kind idem.ShardKind, opts ...idem.Option) *Env {
	t.Helper()
	e := &Env{Dialect: d, DB: db, Table: table}
	store, err := idem.New(d, append([]idem.Option{idem.WithTable(e.Table), idem.WithShardColumn(kind)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.Store = store
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	dropAtEnd(t, db, e.Table)
	if d.Name() == "mysql" {
		DropProceduresAtEnd(t, db, e.Table)
	}
	return e
}

// Place returns a Func that writes customer's order for key, noted "done",
// and answers resp.
func (o *Orders) Place(customer int64, key string, resp idem.Response) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if err := o.Insert(ctx, tx, customer, key); err != nil {
			return idem.Response{}, err
		}
		return resp, nil
	}
}

// InsertSQL is the statement that Insert sends: its arguments are the
// customer id and the EffectKey of the key.
func (o *Orders) InsertSQL() string {
	return "INSERT INTO " + o.Table + " (customer_id, k, note) VALUES (" + o.dialect.Placeholder(1) + ", " + o.dialect.Placeholder(2) + ", 'done')"
}

// Insert writes customer's order for key through ex.
func (o *Orders) Insert(ctx context.Context, ex Execer, customer int64, key string) error {
	_, err := ex.ExecContext(ctx, o.InsertSQL(), customer, EffectKey(key))
	return err
}

// Count counts customer's orders for key, on the customer's shard alone.
func (o *Orders) Count(t testing.TB, customer int64, key string) int {
	t.Helper()
	var n int
	err := o.db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+o.Table+" WHERE customer_id = "+
		o.dialect.Placeholder(1)+" AND k = "+o.dialect.Placeholder(2), customer, EffectKey(key)).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
