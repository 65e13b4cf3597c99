package idemtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/placement"
)

// TestDialect runs the contract of Do against a real database through d, one
// named subtest per property. open returns the database for one subtest,
// closed by open's own cleanup if it needs closing; TestDialect creates its
// tables there under random names and drops them at the end: the dialect's
// own, and beside it a table of the properties' effects, in plain SQL:
// (k VARCHAR(1100) NOT NULL, note TEXT NOT NULL). Through idem.Vitess(), on
// a sharded keyspace, the effect table also holds the key itself, rk, and
// TestDialect names both tables in the keyspace's VSchema with its xxhash
// vindex, idem's by key and the effects by rk, so that a property's
// transaction stays on its key's shard (docs/scaling.md). On the
// coordinator of a Citus cluster (a PostgreSQL database, through a dialect
// named "postgres", with the citus extension and an active node that takes
// shards), the effect table holds rk too, and TestDialect distributes both
// tables by those columns, co-located.
//
// The properties are those of docs/contract.md: claim, replay byte for byte,
// mismatch, an error that stores nothing, rollback freeing the key, a
// concurrent claim that waits and then replays or claims, the lock timeout
// answering InFlight with the transaction still usable, lost races under
// REPEATABLE READ and SERIALIZABLE, expiry with one winner, a takeover that
// checks the expiry, purge, keys compared byte for byte, bad input, large
// responses, damaged records, refusals, DoTx with LookupAlways,
// completions and abandons guarded by the claim's token after the server
// ended the transaction, and a race of 32 goroutines; and, through Run's
// statements, a multi-step request that claims and replays, resumes after
// a failed step, is held by its lease and taken over once it ran out, and
// is driven to its end by Resume that backs off after a failure. A
// dialect without Run statements skips those, saying so. Stats counts the
// live, in-flight and expired records with the dialect's Stats and
// CountExpired statements, and skips where it has neither. Forget deletes a
// finished record so that its key runs anew, and never one whose request
// a transaction or a live lease holds. Each record has an incarnation of
// its own (Incarnation, and RunIncarnation through Run's statements): its
// claim writes a nonzero one, which replays, phases, resumes and the
// takeover of a live request keep, and the request after Forget, a release
// or the expiry of the record gets another. The call key that Run hands a
// Call step names one record by it, and is the one that an operator
// computes from the incarnation that Lookup reads: the next record of a
// key, after ReleaseUndone, Forget or the takeover of an expired record,
// gives its call a new one (CallKeysPerRecord), and one record keeps its
// own across a retry that resumes it, a takeover after its lease ran out
// and Resume (CallKeysKept).
//
// Where d implements dialect.ShardColumn, four more run on a store with
// idem.WithShardColumn(idem.ShardInt64()), whose requests place a
// customer's orders in a table beside idem's: ShardColumn (claim, replay
// byte for byte, mismatch, one key of two customers being two records,
// every call without a shard value refused with ErrInvalidArgument before
// it sends a statement, InFlight for a key that a transaction of the
// customer holds), ShardColumnPurge (the expired
// records of several customers deleted, and no live one, also of a key
// that expired for another customer), ShardColumnResume (Unfinished gives
// the shard value, and Resume puts it in the steps' context) and
// CallKeysPerShardValue (two customers' records of one key give their
// calls two call keys). Five more run on stores of every kind
// (idem.ShardInt64, ShardText, ShardBytes, ShardUUID), with values at the
// kinds' edges:
//
//   - ShardColumnMissing: Migrate refuses a table without shard_key, and
//     one whose shard_key is of another kind's type, and a call on the
//     first fails without running its Func, naming Migrate or the steps.
//   - ShardValueRefused: a value the column cannot hold exactly is refused
//     by Do, DoTx, Run and Lookup with ErrInvalidArgument before a statement.
//   - ShardValueExact: values a collation would fold or pad, or a
//     conversion round or cut, are records of their own, each replayed.
//   - ShardValueOwnLock: one key under two shard values is claimed in two
//     open transactions at once; a record's lock is the pair's.
//   - ShardValueListed: Unfinished gives each value as the Store binds it,
//     and Purge deletes the expired records of every value.
//
// Where d does not implement it, they check that New refuses the option,
// and skip. Through idem.Vitess() idem's table is sharded by shard_key
// and the orders by customer_id with the xxhash vindex, and on a Citus
// coordinator both are distributed by those columns, co-located.
//
// The properties read what d declares in its Capabilities (see
// dialect.CapabilitiesOf): a dialect whose database lets one transaction write
// at a time, such as SQLite, skips the properties that need two writers at
// once, and says so; one whose database cannot wait less than MinLockWait
// for a held key is held to that; and one whose database settles a race at
// commit (ConflictAtCommit) skips the properties of a claim that meets a
// held key, for one that races two claims to the commit.
//
// The Store runs on database/sql here (SQLDriver); TestDriver runs the same
// properties through another driver.
func TestDialect(t *testing.T, d idem.Dialect, open func(t *testing.T) *sql.DB) {
	t.Helper()
	TestDriver(t, d, open, func(_ *testing.T, db *sql.DB) Driver { return SQLDriver(db) })
}

// TestDriver is TestDialect with the Store's calls sent through the Driver
// that driver makes for each property's database: Do and DoTx, the
// statements of their Funcs, and the transactions that the properties hold.
// The *sql.DB of open still sets up and inspects: it creates and drops the
// tables, reads the raw records, counts the effects, and runs Lookup and
// Purge, which have no part in a driver's path. A Store that runs on another
// driver (idempgx, on pgx's own interface) is thus held to the same
// contract, on the same tables, as on database/sql.
//
// driver is called once per property, after open. What it opens it closes
// with t.Cleanup: cleanups run last first, so that happens after the
// transactions the property left open were rolled back and its tables
// dropped. The Torture property runs 32 goroutines at once, on up to 36
// connections through database/sql: a Driver whose pool is smaller makes
// them take turns, and so races less.
func TestDriver(t *testing.T, d idem.Dialect, open func(t *testing.T) *sql.DB, driver func(t *testing.T, db *sql.DB) Driver) {
	t.Helper()
	caps := dialect.CapabilitiesOf(d)
	for _, p := range []struct {
		name string
		test func(t *testing.T, s *suite)
	}{
		{"Claim", testClaim},
		{"ReplayByteForByte", testReplay},
		{"Mismatch", testMismatch},
		{"FuncErrorStoresNothing", testFuncError},
		{"RollbackFreesKey", testRollback},
		{"ConcurrentClaimWaitsThenReplays", testWaitThenReplay},
		{"ConcurrentClaimWaitsThenClaims", testWaitThenClaim},
		{"LockTimeoutAnswersInFlight", testLockTimeout},
		{"ConflictAtCommit", testConflictAtCommit},
		{"StricterIsolation", testIsolation},
		{"ExpiryHasOneWinner", testExpiry},
		{"TakeoverChecksExpiry", testTakeoverChecksExpiry},
		{"LookupFirst", testLookupFirst},
		{"Purge", testPurge},
		{"Stats", testStats},
		{"KeysAreBytes", testKeysAreBytes},
		{"BadInput", testBadInput},
		{"LargeResponses", testLargeResponses},
		{"CorruptRecord", testCorruptRecord},
		{"Refusable", testRefusable},
		{"GuardedAfterTxEnds", testGuarded},
		{"Torture", testTorture},
		{"RunClaimsAndReplays", testRunClaimsAndReplays},
		{"RunResumes", testRunResumes},
		{"RunLease", testRunLease},
		{"Resume", testResume},
		{"Forget", testForget},
		{"ForgetNeverTakesARunningRequest", testForgetRunning},
		{"Incarnation", testIncarnation},
		{"RunIncarnation", testRunIncarnation},
		{"ShardColumn", testShardColumn},
		{"ShardColumnPurge", testShardColumnPurge},
		{"ShardColumnResume", testShardColumnResume},
		{"ShardColumnMissing", testShardColumnMissing},
		{"ShardValueRefused", testShardValueRefused},
		{"ShardValueExact", testShardValueExact},
		{"ShardValueOwnLock", testShardValueOwnLock},
		{"ShardValueListed", testShardValueListed},
		{"CallKeysPerRecord", testCallKeysPerRecord},
		{"CallKeysPerShardValue", testCallKeysPerShardValue},
		{"CallKeysKept", testCallKeysKept},
	} {
		t.Run(p.name, func(t *testing.T) {
			db := open(t)
			p.test(t, &suite{d: d, caps: caps, db: db, distributed: placement.CitusCoordinator(t, d, db), drv: driver(t, db)})
		})
	}
}

// suite is one property's database, dialect and Driver: db sets up and
// inspects, drv runs the Store and holds the transactions. distributed
// says that db is a Citus coordinator, which distributes the property's
// tables (internal/placement).
type suite struct {
	d           idem.Dialect
	caps        dialect.Capabilities
	db          *sql.DB
	distributed bool
	drv         Driver
}

// env is a store on a table of its own, with an effect table beside it,
// set up and inspected through the suite's *sql.DB. Its methods reach the
// store through the suite's Driver, under the names the properties use.
type env struct {
	*suite
	storeTable
	effects *effects
}

// env makes a store with opts on a new table, migrates it, and creates an
// effect table; both are dropped at the end of the test.
func (s *suite) env(t *testing.T, opts ...idem.Option) *env {
	t.Helper()
	return s.envOn(t, s.d, opts...)
}

// envOn is env with a store of d, the suite's dialect or one that wraps it
// (movedClock). Through idem.Vitess(), idem's table is sharded by key and
// the effects by rk; on a Citus coordinator, both are distributed by them,
// co-located (internal/placement).
func (s *suite) envOn(t *testing.T, d idem.Dialect, opts ...idem.Option) *env {
	t.Helper()
	suffix := randomName()
	st := newStore(t, d, s.db, "idem_"+suffix, opts...)
	if placement.Sharded(s.d) {
		placement.AddVindex(t, s.db, st.table, "`key`")
	}
	fx := newEffects(t, s, "effects_"+suffix)
	if s.distributed {
		placement.Distribute(t, s.db, st.table, "key", "")
		placement.Distribute(t, s.db, fx.table, "rk", st.table)
	}
	return &env{suite: s, storeTable: st, effects: fx}
}

// effect returns a Func that writes one effect row for key, noted "done",
// through the Driver's Tx, and answers resp.
func (e *env) effect(key string, resp idem.Response) Func {
	insert := e.effects.insertSQL()
	return func(ctx context.Context, tx Tx) (idem.Response, error) {
		if _, err := tx.Exec(ctx, insert, effectKey(key), "done"); err != nil {
			return idem.Response{}, err
		}
		return resp, nil
	}
}

// begin begins a transaction through the Driver with opts, rolled back at
// the end of the test if still open.
func (s *suite) begin(t *testing.T, opts *sql.TxOptions) Tx {
	t.Helper()
	tx, err := s.drv.Begin(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// do runs Do in a transaction of its own, then commits it when commit is
// true and Do succeeded, and rolls it back otherwise.
func (e *env) do(t *testing.T, key string, hash []byte, fn Func, commit bool) (idem.Result, error) {
	t.Helper()
	return e.doWith(context.Background(), t, e.store, key, hash, fn, commit)
}

// doWith is env.do with store, under ctx.
func (s *suite) doWith(ctx context.Context, t *testing.T, store *idem.Store, key string, hash []byte, fn Func, commit bool) (idem.Result, error) {
	t.Helper()
	tx := s.begin(t, nil)
	res, err := s.drv.Do(ctx, store, tx, key, hash, fn)
	if err == nil && commit {
		if cerr := tx.Commit(ctx); cerr != nil {
			t.Fatalf("commit: %v", cerr)
		}
	} else if rerr := tx.Rollback(ctx); rerr != nil {
		t.Fatalf("rollback: %v", rerr)
	}
	return res, err
}

// hold claims key for created in a transaction that it leaves open, like a
// request still being served.
func (e *env) hold(t *testing.T, key string) Tx {
	t.Helper()
	tx := e.begin(t, nil)
	res, err := e.drv.Do(context.Background(), e.store, tx, key, hashA, e.effect(key, created))
	wantOutcome(t, res, err, idem.Claimed)
	return tx
}

// rawRecords reads every record of the table as stored, to show that a call
// changed nothing.
func (e *env) rawRecords(t *testing.T) [][]any {
	t.Helper()
	return e.storedRecords(t, e.table, false)
}

// storedRecords reads every record of table as stored, ordered by creation;
// withShard puts each record's shard value (an integer) first, and orders
// by it first.
func (s *suite) storedRecords(t *testing.T, table string, withShard bool) [][]any {
	t.Helper()
	cols, order := "request_hash, status, header, body, checksum, created_at, expires_at", "created_at"
	if withShard {
		cols, order = "shard_key, "+cols, "shard_key, "+order
	}
	rows, err := s.db.QueryContext(context.Background(), "SELECT "+cols+" FROM "+table+" ORDER BY "+order)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all [][]any
	for rows.Next() {
		var (
			shard, createdAt, expiresAt int64
			hash, header, body, sum     []byte
			status                      sql.NullInt64
		)
		dest := []any{&hash, &status, &header, &body, &sum, &createdAt, &expiresAt}
		if withShard {
			dest = append([]any{&shard}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		rec := []any{hash, status, header, body, sum, createdAt, expiresAt}
		if withShard {
			rec = append([]any{shard}, rec...)
		}
		all = append(all, rec)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return all
}

var (
	hashA = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":88}`))
	hashB = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":89}`))

	// created has every part that must survive a replay.
	created = idem.Response{
		Status: 201,
		Header: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/orders/1"},
			"X-Multi":      {"a", "", "b"},
		},
		Body: []byte("{\"order\":1}\x00\xff\n"),
	}
)

func wantOutcome(t *testing.T, res idem.Result, err error, want idem.Outcome) {
	t.Helper()
	if err != nil {
		t.Fatalf("Do: %v, want outcome %v", err, want)
	}
	if res.Outcome != want {
		t.Fatalf("outcome = %v, want %v", res.Outcome, want)
	}
}

func sameResponse(t *testing.T, got, want idem.Response) {
	t.Helper()
	if got.Status != want.Status || !reflect.DeepEqual(got.Header, want.Header) || !bytes.Equal(got.Body, want.Body) {
		t.Errorf("response = %d %v %q, want %d %v %q", got.Status, got.Header, got.Body, want.Status, want.Header, want.Body)
	}
}

// wantEffects fails the test unless key has n effect rows.
func (e *env) wantEffects(t *testing.T, key string, n int) {
	t.Helper()
	if got := e.effects.count(t, key); got != n {
		t.Errorf("key %q: %d effect rows, want %d", key, got, n)
	}
}

// mustNotRun is a Func that fails the test if it runs.
func mustNotRun(t *testing.T) Func {
	return func(context.Context, Tx) (idem.Response, error) {
		t.Error("fn ran, but it must not")
		return idem.Response{}, errors.New("fn must not run")
	}
}

// within fails the test when d is not between lo and hi. Every caller says
// what a wrong answer would take and why its bounds tell it from a right one
// that a loaded machine has slowed down.
func within(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s took %v, want between %v and %v", what, d, lo, hi)
	}
}

// after runs f after d in the background, and waits for it at the end of the
// test. d is a delay, not a bound: load may stretch it, and every caller
// says why its test still holds when it does.
func after(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		time.Sleep(d)
		if err := f(); err != nil {
			t.Errorf("background: %v", err)
		}
	}()
}

// clock is a settable clock for WithClock.
type clock struct{ now atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.now.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.now.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.now.Add(int64(d)) }

func keyName(i int) string { return fmt.Sprintf("key-%d", i) }
