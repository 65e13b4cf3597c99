package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// forEachShardTarget runs f on every target of multi-step requests, then
// on Vitess's sharded keyspace and on Citus, or shows them skipped: a store
// with a shard column works on every dialect, and is what the sharded
// databases need when the effects are sharded by a column of their own.
func forEachShardTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEachRunTarget(t, f)
	dbtest.ForEachVitess(t, f)
	dbtest.ForEachCitus(t, f)
}

// TestShardColumn shows a store whose table has a shard column, holding
// the customer id of the orders that the requests place, on every
// database: Do, DoTx and Lookup name a record by the context's shard value
// and its key, so that one key is claimed once for each customer, and a
// call without a shard value is refused before it touches the database.
func TestShardColumn(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		e, orders := tg.SetupByCustomer(t, idem.WithLockTimeout(100*time.Millisecond))
		bg := context.Background()
		alice, bob := idem.WithShard(bg, int64(7)), idem.WithShard(bg, int64(8))

		tx := e.Begin(t, nil)
		if _, err := e.Store.Do(bg, tx, "order-1", dbtest.HashA, orders.Place(7, "order-1", dbtest.Created)); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Do without a shard value: %v, want ErrInvalidArgument", err)
		}
		if _, err := e.Store.Do(idem.WithShard(bg, 1.5), tx, "order-1", dbtest.HashA, orders.Place(7, "order-1", dbtest.Created)); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Do with a float shard value: %v, want ErrInvalidArgument", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Store.Lookup(bg, e.DB, "order-1"); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Lookup without a shard value: %v, want ErrInvalidArgument", err)
		}

		do := func(ctx context.Context, customer int64, key string, hash []byte) (idem.Result, error) {
			t.Helper()
			tx := e.Begin(t, nil)
			res, err := e.Store.Do(ctx, tx, key, hash, orders.Place(customer, key, dbtest.Created))
			if err != nil {
				return res, err
			}
			return res, tx.Commit()
		}
		res, err := do(alice, 7, "order-1", dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		res, err = do(alice, 7, "order-1", dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, dbtest.Created)
		res, err = do(alice, 7, "order-1", dbtest.HashB)
		dbtest.WantOutcome(t, res, err, idem.Mismatch)
		// Another customer's request with the same key is another record.
		res, err = do(bob, 8, "order-1", dbtest.HashB)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		for _, c := range []int64{7, 8} {
			if n := orders.Count(t, c, "order-1"); n != 1 {
				t.Errorf("customer %d has %d orders order-1, want 1", c, n)
			}
		}

		res, err = e.Store.DoTx(bob, e.DB, nil, "order-2", dbtest.HashA, orders.Place(8, "order-2", dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		res, err = e.Store.DoTx(bob, e.DB, nil, "order-2", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		res, err = e.Store.Lookup(alice, e.DB, "order-1")
		dbtest.WantOutcome(t, res, err, idem.Replay)
		if _, err := e.Store.Lookup(alice, e.DB, "order-2"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup of bob's key as alice's: %v, want ErrNotFound", err)
		}

		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			return // a second writer would wait at BEGIN
		}
		holder := e.Begin(t, nil)
		res, err = e.Store.Do(alice, holder, "order-3", dbtest.HashA, orders.Place(7, "order-3", dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		res, err = do(alice, 7, "order-3", dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.InFlight)
		if err := holder.Commit(); err != nil {
			t.Fatal(err)
		}
		res, err = do(alice, 7, "order-3", dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Replay)
	})
}

// TestShardColumnOperators shows the operators on a store with a shard
// column: Forget and Settle act on the record of the context's shard value
// alone, and Purge deletes the expired records of every shard value, by
// their shard value and key, and no live one.
func TestShardColumnOperators(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e, orders := tg.SetupByCustomer(t, idem.WithClock(c.Now))
		bg := context.Background()
		for customer := int64(1); customer <= 3; customer++ {
			ctx := idem.WithShard(bg, customer)
			for _, key := range []string{"order-a", "order-b"} {
				res, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, orders.Place(customer, key, dbtest.Created))
				dbtest.WantOutcome(t, res, err, idem.Claimed)
			}
		}
		one := idem.WithShard(bg, int64(1))
		if err := e.Store.Forget(bg, e.DB, "order-a"); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Forget without a shard value: %v, want ErrInvalidArgument", err)
		}
		if err := e.Store.Forget(one, e.DB, "order-a"); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		if _, err := e.Store.Lookup(one, e.DB, "order-a"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup after Forget: %v, want ErrNotFound", err)
		}
		res, err := e.Store.Lookup(idem.WithShard(bg, int64(2)), e.DB, "order-a")
		dbtest.WantOutcome(t, res, err, idem.Replay)

		// Customer 3's records are younger: they outlive the purge.
		c.Advance(idem.DefaultRetention / 2)
		three := idem.WithShard(bg, int64(3))
		if err := e.Store.Forget(three, e.DB, "order-b"); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		res, err = e.Store.DoTx(three, e.DB, nil, "order-b", dbtest.HashA, orders.Place(3, "order-b", dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		c.Advance(idem.DefaultRetention/2 + time.Second)
		n, err := e.Store.Purge(bg, e.DB, 2)
		if err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if n != 4 {
			t.Errorf("Purge deleted %d records, want 4", n)
		}
		res, err = e.Store.Lookup(three, e.DB, "order-b")
		dbtest.WantOutcome(t, res, err, idem.Replay)
		var left int
		if err := e.DB.QueryRow("SELECT count(*) FROM " + e.Table).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 1 {
			t.Errorf("%d records left, want 1, customer 3's order-b", left)
		}
	})
}

// TestShardColumnResume leaves a multi-step request of a store with a
// shard column unfinished: Unfinished lists it with its shard value, and
// Resume runs its steps with that value in their context, to the end.
func TestShardColumnResume(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e, orders := c.Leases(tg).SetupByCustomer(t, idem.WithClock(c.Now))
		ctx := idem.WithShard(context.Background(), int64(5))
		down := errors.New("provider unreachable")
		steps := func(charge error) []idem.Step {
			return []idem.Step{
				idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
					return orders.Insert(ctx, tx, 5, "order-r")
				}),
				idem.Phase("charge", func(context.Context, *sql.Tx) error { return charge }),
				idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return dbtest.Created, nil }),
			}
		}
		if _, err := e.Store.Run(ctx, e.DB, nil, "order-r", dbtest.HashA, steps(down)...); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}
		c.Advance(idem.DefaultResumeAge)
		list, err := e.Store.Unfinished(context.Background(), e.DB, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Key != "order-r" || list[0].Shard != int64(5) {
			t.Fatalf("Unfinished = %+v, want order-r of shard value 5 (int64)", list)
		}
		rep, err := e.Store.Resume(context.Background(), e.DB, nil, func(ctx context.Context, key string) ([]idem.Step, error) {
			if v, ok := idem.ShardFrom(ctx); !ok || v != int64(5) {
				t.Errorf("Resume's steps of %s have shard value %v, %v; want 5", key, v, ok)
			}
			return steps(nil), nil
		})
		if err != nil || rep != (idem.ResumeReport{Finished: 1}) {
			t.Fatalf("Resume: %+v, %v; want one finished", rep, err)
		}
		res, err := e.Store.Run(ctx, e.DB, nil, "order-r", dbtest.HashA, steps(nil)...)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		if n := orders.Count(t, 5, "order-r"); n != 1 {
			t.Errorf("%d orders, want 1", n)
		}
	})
}

// TestShardColumnInvalid shows what New refuses of a shard column: a kind
// that is not one, and a dialect without tables that have it; and what
// ParseShardKind reads and refuses.
func TestShardColumnInvalid(t *testing.T) {
	for _, kind := range []idem.ShardKind{{}, idem.ShardText(0), idem.ShardText(256), idem.ShardBytes(-1),
		{Type: dialect.ShardInt64, MaxBytes: 8}, {Type: 9}} {
		if _, err := idem.New(idem.SQLite(), idem.WithShardColumn(kind)); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("WithShardColumn(%v): %v, want ErrInvalidArgument", kind, err)
		}
	}
	if _, err := idem.New(plainDialect{idem.SQLite()}, idem.WithShardColumn(idem.ShardInt64())); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("a dialect without dialect.ShardColumn: %v, want ErrInvalidArgument", err)
	}
	for _, kind := range []idem.ShardKind{idem.ShardInt64(), idem.ShardText(1), idem.ShardText(255), idem.ShardBytes(16), idem.ShardUUID()} {
		if _, err := idem.New(idem.SQLite(), idem.WithShardColumn(kind)); err != nil {
			t.Errorf("WithShardColumn(%v): %v", kind, err)
		}
		if got, err := idem.ParseShardKind(kind.String()); err != nil || got != kind {
			t.Errorf("ParseShardKind(%q) = %v, %v, want %v", kind.String(), got, err, kind)
		}
	}
	if got, err := idem.ParseShardKind(" TEXT(64) "); err != nil || got != idem.ShardText(64) {
		t.Errorf("ParseShardKind(\" TEXT(64) \") = %v, %v, want text(64)", got, err)
	}
	for _, s := range []string{"", "bigint", "text", "text()", "text(0)", "text(256)", "bytes(x)", "text(64", "uuid(16)", "int64(8)"} {
		if _, err := idem.ParseShardKind(s); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("ParseShardKind(%q): %v, want ErrInvalidArgument", s, err)
		}
	}
}

// plainDialect is a dialect with no optional interface of its own.
type plainDialect struct{ dialect.Dialect }

// TestShardColumnOnVitess shows why a store needs a shard column on
// Vitess when the effects are sharded by customer: with transaction_mode
// SINGLE, a record sharded by its key, as the default table is, and an
// order on the customer's shard, elsewhere, make a transaction on two
// shards, which vtgate refuses; with the record sharded by shard_key
// through the same vindex as the orders' customer_id, the two are on one
// shard, and the request commits.
func TestShardColumnOnVitess(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		e, orders := tg.SetupByCustomer(t)
		plain := setup(t, tg)
		const customer = int64(7)
		home, err := dbtest.ShardOf(ctx, e.DB, customer)
		if err != nil {
			t.Fatal(err)
		}
		key := ""
		for i := 0; key == ""; i++ {
			k := fmt.Sprintf("order-%d", i)
			shard, err := dbtest.ShardOf(ctx, e.DB, []byte(k))
			if err != nil {
				t.Fatal(err)
			}
			if shard != home {
				key = k
			}
		}

		_, err = plain.Do(t, key, dbtest.HashA, orders.Place(customer, key, dbtest.Created), true)
		if my := dbtest.VitessError(t, "Do on the table sharded by key", err); my.Number != 1317 || !strings.Contains(my.Message, "multi-db transaction attempted") {
			t.Errorf("Do on the table sharded by key: error %d %q, want 1317, a multi-db transaction", my.Number, my.Message)
		}

		tx := e.Begin(t, nil)
		res, err := e.Store.Do(idem.WithShard(ctx, customer), tx, key, dbtest.HashA, orders.Place(customer, key, dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if n := orders.Count(t, customer, key); n != 1 {
			t.Errorf("%d orders, want 1", n)
		}
		var records int
		if err := e.DB.QueryRow("SELECT count(*) FROM "+e.Table+" WHERE shard_key = ? AND `key` = ?", customer, key).Scan(&records); err != nil {
			t.Fatal(err)
		}
		if records != 1 {
			t.Errorf("%d records, want 1", records)
		}
	})
}

// TestShardColumnOnCitus shows a store with a shard column on Citus: its
// table, distributed by shard_key, and the orders, distributed by
// customer_id, are in one co-location group, and a customer's record and
// order are on one worker.
func TestShardColumnOnCitus(t *testing.T) {
	dbtest.ForEachCitus(t, func(t *testing.T, tg target) {
		e, orders := tg.SetupByCustomer(t)
		const customer = int64(7)
		res, err := e.Store.DoTx(idem.WithShard(context.Background(), customer), e.DB, nil, "order-1", dbtest.HashA, orders.Place(customer, "order-1", dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		var sameGroup bool
		if err := e.DB.QueryRow(`SELECT count(DISTINCT colocationid) = 1 FROM pg_dist_partition WHERE logicalrelid IN ($1::regclass, $2::regclass)`,
			e.Table, orders.Table).Scan(&sameGroup); err != nil {
			t.Fatal(err)
		}
		if !sameGroup {
			t.Errorf("%s and %s are in different co-location groups", e.Table, orders.Table)
		}
		place := `SELECT nodename || ':' || nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column($1, $2::bigint)`
		var record, order string
		if err := e.DB.QueryRow(place, e.Table, customer).Scan(&record); err != nil {
			t.Fatal(err)
		}
		if err := e.DB.QueryRow(place, orders.Table, customer).Scan(&order); err != nil {
			t.Fatal(err)
		}
		if record != order {
			t.Errorf("customer %d's record is on %s and its order on %s, want one worker", customer, record, order)
		}
		if n := orders.Count(t, customer, "order-1"); n != 1 {
			t.Errorf("%d orders, want 1", n)
		}
	})
}

// TestNewChecksShardBound shows that New refuses a dialect whose
// statements of a table with a shard column name a record by its key
// alone: each built-in dialect's Lookup, Complete and Run.Advance with the
// condition on shard_key left out.
func TestNewChecksShardBound(t *testing.T) {
	for _, d := range []idem.Dialect{idem.SQLite(), idem.Postgres(), idem.MySQL(), idem.MariaDB(), idem.TiDB(), idem.Vitess()} {
		for _, c := range []struct {
			name   string
			change func(st *dialect.Statements, drop func(string) string)
		}{
			{"Lookup", func(st *dialect.Statements, drop func(string) string) { st.Lookup = drop(st.Lookup) }},
			{"Complete", func(st *dialect.Statements, drop func(string) string) { st.Complete = drop(st.Complete) }},
			{"Run.Advance", func(st *dialect.Statements, drop func(string) string) { st.Run.Advance = drop(st.Run.Advance) }},
		} {
			broken := badShardStatements{Dialect: d, change: func(st *dialect.Statements) {
				c.change(st, func(q string) string {
					out := strings.Replace(strings.Replace(q, "p.shard_key = {shard} AND ", "", 1), "shard_key = {shard} AND ", "", 1)
					if out == q {
						t.Fatalf("%s: the %s statement has no condition on shard_key: %s", d.Name(), c.name, q)
					}
					return out
				})
			}}
			_, err := idem.New(broken, idem.WithShardColumn(idem.ShardInt64()))
			if !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), "the "+c.name+" statement binds {key} and not {shard}") {
				t.Errorf("%s without shard_key in its %s statement: New = %v, want ErrInvalidArgument naming it", d.Name(), c.name, err)
			}
		}
	}
}
