package idemtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/placement"
)

// The properties of a table with a shard column (idem.WithShardColumn), for
// a dialect that implements dialect.ShardColumn, through the suite's
// Driver. The column is of kind shardKind, idem.ShardInt64(), which the
// built-in dialects declare as the type of the orders' customer_id,
// customerType (BIGINT), and holds the customer id of the orders that the
// requests place, in a table of orders beside idem's (tables.go): the
// effects are sharded by customer, not by key. The properties of the other
// kinds, without orders, are in shard_values.go.

// shardEnv is a store with a shard column, on a table of its own, and the
// orders beside it.
type shardEnv struct {
	*suite
	storeTable
	orders *orders
}

// shardEnv makes a store with a shard column and opts, or skips the
// property for a dialect that cannot make one, after checking that New
// refuses it as its documentation says. On Vitess both tables are sharded
// by customer with the keyspace's vindex, idem's by shard_key and the
// orders by customer_id, and on Citus distributed by them, idem's in the
// orders' co-location group, as docs/scaling.md tells an operator to.
func (s *suite) shardEnv(t *testing.T, opts ...idem.Option) *shardEnv {
	t.Helper()
	if _, ok := s.d.(dialect.ShardColumn); !ok {
		if _, err := idem.New(s.d, idem.WithShardColumn(shardKind)); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("New with a shard column, on a dialect without dialect.ShardColumn: %v, want ErrInvalidArgument", err)
		}
		t.Skip("the dialect does not implement dialect.ShardColumn: New refuses a Store with idem.WithShardColumn (ErrInvalidArgument)")
	}
	suffix := randomName()
	st := newStore(t, s.d, s.db, "idem_"+suffix, append([]idem.Option{idem.WithShardColumn(shardKind)}, opts...)...)
	o := newOrders(t, s, "orders_"+suffix)
	switch {
	case placement.Sharded(s.d):
		placement.AddVindex(t, s.db, st.table, "shard_key")
		placement.AddVindex(t, s.db, o.table, "customer_id")
	case s.distributed:
		// The orders first, as a service's tables are there before
		// idem's: idem's table joins their co-location group.
		placement.Distribute(t, s.db, o.table, "customer_id", "")
		placement.Distribute(t, s.db, st.table, "shard_key", o.table)
	}
	return &shardEnv{suite: s, storeTable: st, orders: o}
}

// customer is the context of customer's requests.
func customer(id int64) context.Context { return idem.WithShard(context.Background(), id) }

// place returns a Func that writes id's order for key through the Driver's
// Tx, and answers resp.
func (e *shardEnv) place(id int64, key string, resp idem.Response) Func {
	insert := e.orders.insertSQL()
	return func(ctx context.Context, tx Tx) (idem.Response, error) {
		if _, err := tx.Exec(ctx, insert, id, effectKey(key)); err != nil {
			return idem.Response{}, err
		}
		return resp, nil
	}
}

// do runs Do for customer id in a transaction of its own, and commits it
// when Do succeeded and commit is true.
func (e *shardEnv) do(t *testing.T, id int64, key string, hash []byte, fn Func, commit bool) (idem.Result, error) {
	t.Helper()
	return e.doWith(customer(id), t, e.store, key, hash, fn, commit)
}

// wantOrders fails the test unless customer id has n orders for key.
func (e *shardEnv) wantOrders(t *testing.T, id int64, key string, n int) {
	t.Helper()
	if got := e.orders.count(t, id, key); got != n {
		t.Errorf("customer %d: %d orders for %q, want %d", id, got, key, n)
	}
}

// records reads every record of the table as stored, with its shard value,
// ordered by shard value and creation.
func (e *shardEnv) records(t *testing.T) [][]any {
	t.Helper()
	return e.storedRecords(t, e.table, true)
}

// testShardColumn claims, replays byte for byte and mismatches a key of one
// customer; claims the same key for another customer as a record of its
// own, with an incarnation of its own; refuses each call without a shard value before it sends a
// statement; and, where two writers run at once, answers InFlight for a
// key that a transaction of the same customer holds.
func testShardColumn(t *testing.T, s *suite) {
	e := s.shardEnv(t, idem.WithLockTimeout(300*time.Millisecond))
	const alice, bob = 7, 8
	seen := incarnations{}
	res, err := e.do(t, alice, "k", hashA, e.place(alice, "k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	sameResponse(t, res.Response, created)
	seen.fresh(t, "the claim of alice's key", res)
	stored := e.records(t)
	again, err := e.do(t, alice, "k", hashA, mustNotRun(t), true)
	wantOutcome(t, again, err, idem.Replay)
	sameResponse(t, again.Response, created)
	if !again.CreatedAt.Equal(res.CreatedAt) || !again.ExpiresAt.Equal(res.ExpiresAt) {
		t.Errorf("replay times %v %v, want %v %v", again.CreatedAt, again.ExpiresAt, res.CreatedAt, res.ExpiresAt)
	}
	res, err = e.do(t, alice, "k", hashB, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.Mismatch)
	if got := e.records(t); !reflect.DeepEqual(got, stored) {
		t.Errorf("a replay or a mismatch changed the record:\n got %v\nwant %v", got, stored)
	}

	// The same key under another shard value is another record: a
	// statement that names the record by its key alone finds alice's,
	// and answers Mismatch or Replay.
	bobs := idem.Response{Status: 202, Body: []byte("bob's order")}
	res, err = e.do(t, bob, "k", hashB, e.place(bob, "k", bobs), true)
	wantOutcome(t, res, err, idem.Claimed)
	seen.fresh(t, "the claim of the same key for bob", res)
	res, err = e.drv.DoTx(customer(bob), e.store, nil, "k", hashB, mustNotRun(t))
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, bobs)
	res, err = e.do(t, alice, "k", hashA, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, created)
	looked, err := e.store.Lookup(customer(bob), e.db, "k")
	wantOutcome(t, looked, err, idem.Replay)
	sameResponse(t, looked.Response, bobs)
	if _, err := e.store.Lookup(customer(9), e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup of the key for a third customer: %v, want ErrNotFound", err)
	}
	if n := len(e.records(t)); n != 2 {
		t.Errorf("%d records, want 2, one per customer", n)
	}
	e.wantOrders(t, alice, "k", 1)
	e.wantOrders(t, bob, "k", 1)

	testNoShardValue(t, e)

	if s.caps.OneWriter || s.caps.ConflictAtCommit {
		return // no claim meets a key that another transaction holds (LockTimeoutAnswersInFlight)
	}
	holder := s.begin(t, nil)
	res, err = e.drv.Do(customer(alice), e.store, holder, "held", hashA, e.place(alice, "held", created))
	wantOutcome(t, res, err, idem.Claimed)
	start := time.Now()
	res, err = e.do(t, alice, "held", hashA, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.InFlight)
	// As in testLockTimeout: at least the lock timeout, at most
	// inFlightSlack more, or MinLockWait where the database insists.
	within(t, "InFlight", time.Since(start), 300*time.Millisecond, max(300*time.Millisecond, s.caps.MinLockWait)+inFlightSlack)
	if err := holder.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err = e.do(t, alice, "held", hashA, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.Replay)
	e.wantOrders(t, alice, "held", 1)
}

// testNoShardValue calls each of the Store's calls that name a record
// without a shard value in the context: each must fail with
// ErrInvalidArgument before it sends a statement. Do gets a transaction
// that has already ended, on which any statement fails otherwise; the
// others a database whose every connection fails the test.
func testNoShardValue(t *testing.T, e *shardEnv) {
	t.Helper()
	ctx := context.Background()
	ended := e.begin(t, nil)
	if err := ended.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	refusing := sql.OpenDB(refusingConnector{t})
	t.Cleanup(func() { refusing.Close() })
	fn := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) { return created, nil }
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Do", func() error {
			_, err := e.drv.Do(ctx, e.store, ended, "k", hashA, mustNotRun(t))
			return err
		}},
		{"DoTx", func() error {
			_, err := e.store.DoTx(ctx, refusing, nil, "k", hashA, fn)
			return err
		}},
		{"Run", func() error {
			_, err := e.store.Run(ctx, refusing, nil, "k", hashA, idem.Final("f", fn))
			return err
		}},
		{"Lookup", func() error {
			_, err := e.store.Lookup(ctx, refusing, "k")
			return err
		}},
		{"Settle", func() error { return e.store.Settle(ctx, refusing, "k", created) }},
		{"ReleaseWithoutEffect", func() error { return e.store.ReleaseWithoutEffect(ctx, refusing, "k") }},
		{"ReleaseUndone", func() error { return e.store.ReleaseUndone(ctx, refusing, "k") }},
		{"Forget", func() error { return e.store.Forget(ctx, refusing, "k") }},
	} {
		if err := c.call(); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s without a shard value: %v, want ErrInvalidArgument before any statement", c.name, err)
		}
	}
}

// refusingConnector is a database whose connections fail the test: the
// calls that a Store must refuse before they send anything get it.
type refusingConnector struct{ t *testing.T }

func (c refusingConnector) Connect(context.Context) (driver.Conn, error) {
	c.t.Error("a call without a shard value reached the database")
	return nil, errors.New("idemtest: a call without a shard value must not reach the database")
}

func (c refusingConnector) Driver() driver.Driver { return refusingDriver{c} }

type refusingDriver struct{ c refusingConnector }

func (d refusingDriver) Open(string) (driver.Conn, error) { return d.c.Connect(context.Background()) }

// testShardColumnPurge purges the expired records of three customers,
// among them a key whose record has expired for one customer and is live
// for another: a purge that names a record by its key alone deletes the
// live one too.
func testShardColumnPurge(t *testing.T, s *suite) {
	if _, ok := s.d.(dialect.ShardTargeter); !ok {
		skipIfShardedByKey(t, s, "Purge locks the expired records of every shard in one transaction, unless the dialect is a dialect.ShardTargeter")
	}
	c := newClock()
	e := s.shardEnv(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
	ctx := context.Background()
	for id := int64(1); id <= 3; id++ {
		for i := 0; i < 4; i++ {
			res, err := e.drv.DoTx(customer(id), e.store, nil, keyName(i), hashA, e.place(id, keyName(i), created))
			wantOutcome(t, res, err, idem.Claimed)
		}
	}
	c.Advance(time.Hour)
	// Live records: customer 4's of key-0, the key of an expired record
	// of each of the others, and customer 1's key-9.
	for _, r := range []struct {
		id  int64
		key string
	}{{4, keyName(0)}, {1, keyName(9)}} {
		res, err := e.drv.DoTx(customer(r.id), e.store, nil, r.key, hashA, e.place(r.id, r.key, created))
		wantOutcome(t, res, err, idem.Claimed)
	}
	if n, err := e.store.Purge(ctx, e.db, 5); err != nil || n != 12 {
		t.Fatalf("Purge = %d, %v, want the 12 expired records of three customers", n, err)
	}
	for _, r := range []struct {
		id  int64
		key string
	}{{4, keyName(0)}, {1, keyName(9)}} {
		res, err := e.store.Lookup(customer(r.id), e.db, r.key)
		if err != nil {
			t.Errorf("Lookup of customer %d's live %s after Purge: %v, want it kept", r.id, r.key, err)
			continue
		}
		wantOutcome(t, res, nil, idem.Replay)
	}
	if n := len(e.records(t)); n != 2 {
		t.Errorf("%d records left, want the 2 live ones", n)
	}
	if n, err := e.store.Purge(ctx, e.db, 5); err != nil || n != 0 {
		t.Errorf("second Purge = %d, %v, want 0", n, err)
	}
}

// testShardColumnResume leaves a multi-step request of a customer
// unfinished: Unfinished lists it with the customer's shard value, and
// Resume runs its steps with that value in their context, to the end, on
// the customer's record.
func testShardColumnResume(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	e := s.shardEnv(t)
	const id = 5
	down := errors.New("the provider is down")
	var shardSeen []string
	steps := func(call error) []idem.Step {
		return []idem.Step{
			e.drv.Phase("reserve", func(ctx context.Context, tx Tx) error {
				_, err := tx.Exec(ctx, e.orders.insertSQL(), int64(id), effectKey("k"))
				return err
			}),
			idem.Call("charge", func(context.Context, string) error { return call }),
			e.drv.Final("confirm", func(ctx context.Context, tx Tx) (idem.Response, error) {
				v, ok := idem.ShardFrom(ctx)
				shardSeen = append(shardSeen, fmt.Sprintf("%v %v", v, ok))
				return created, nil
			}),
		}
	}
	if _, err := e.drv.Run(customer(id), e.store, "k", hashA, steps(down)...); !errors.Is(err, down) {
		t.Fatalf("Run with a failing call: %v, want its error", err)
	}
	list, err := e.store.Unfinished(context.Background(), e.db, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The value as the Store binds it, an int64, whatever the driver
	// read.
	if len(list) != 1 || list[0].Key != "k" || list[0].Shard != int64(id) {
		t.Fatalf("Unfinished = %+v, want k of shard value int64(5)", list)
	}
	// Resume's Store runs an hour ahead, so that the request is old
	// enough for it.
	ahead, err := idem.New(s.d, idem.WithTable(e.table), idem.WithShardColumn(shardKind),
		idem.WithClock(func() time.Time { return time.Now().Add(time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.drv.Resume(context.Background(), ahead, func(ctx context.Context, key string) ([]idem.Step, error) {
		if v, ok := idem.ShardFrom(ctx); !ok || v != list[0].Shard {
			t.Errorf("Resume's steps of %s have shard value %v, %v; want %v", key, v, ok, list[0].Shard)
		}
		return steps(nil), nil
	})
	if err != nil || rep.Finished != 1 {
		t.Fatalf("Resume: %+v, %v; want one finished", rep, err)
	}
	if want := []string{fmt.Sprintf("%v true", list[0].Shard)}; !reflect.DeepEqual(shardSeen, want) {
		t.Errorf("the final step's context had shard values %q, want %q", shardSeen, want)
	}
	res, err := e.drv.Run(customer(id), e.store, "k", hashA, steps(nil)...)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, created)
	e.wantOrders(t, id, "k", 1)
	if list, err := e.store.Unfinished(context.Background(), e.db, 0, 10); err != nil || len(list) != 0 {
		t.Errorf("unfinished after Resume: %+v, %v, want none", list, err)
	}
}
