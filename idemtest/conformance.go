package idemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestDialect runs the contract of Do against a real database through d, one
// named subtest per property. open returns the database for one subtest,
// closed by open's own cleanup if it needs closing; TestDialect creates its
// tables there under random names and drops them at the end.
//
// The properties are those of docs/contract.md: claim, replay byte for byte,
// mismatch, an error that stores nothing, rollback freeing the key, a
// concurrent claim that waits and then replays or claims, the lock timeout
// answering InFlight with the transaction still usable, lost races under
// REPEATABLE READ and SERIALIZABLE, expiry with one winner, a takeover that
// checks the expiry, purge, keys
// compared byte for byte, bad input, large responses, damaged records,
// refusals, DoTx with WithLookupFirst, completions and abandons guarded by
// the claim's token after the server ended the transaction, and a race of 32
// goroutines. A
// database that lets one transaction write at a time, such as SQLite, skips
// the two properties that need two writers at once, and says so.
func TestDialect(t *testing.T, d idem.Dialect, open func(t *testing.T) *sql.DB) {
	t.Helper()
	w := new(writers)
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
		{"StricterIsolation", testIsolation},
		{"ExpiryHasOneWinner", testExpiry},
		{"TakeoverChecksExpiry", testTakeoverChecksExpiry},
		{"LookupFirst", testLookupFirst},
		{"Purge", testPurge},
		{"KeysAreBytes", testKeysAreBytes},
		{"BadInput", testBadInput},
		{"LargeResponses", testLargeResponses},
		{"CorruptRecord", testCorruptRecord},
		{"Refusable", testRefusable},
		{"GuardedAfterTxEnds", testGuarded},
		{"Torture", testTorture},
	} {
		t.Run(p.name, func(t *testing.T) {
			p.test(t, &suite{d: d, db: open(t), writers: w})
		})
	}
}

// suite is one property's database and dialect.
type suite struct {
	d       idem.Dialect
	db      *sql.DB
	writers *writers // shared by the properties of one TestDialect
}

// env is a store on a table of its own, with an effect table beside it.
type env struct {
	*suite
	store   *idem.Store
	table   string
	effects string
}

// env makes a store with opts on a new table, migrates it, and creates an
// effect table; both are dropped at the end of the test.
func (s *suite) env(t *testing.T, opts ...idem.Option) *env {
	t.Helper()
	suffix := randomHex(6)
	e := &env{suite: s, table: "idem_" + suffix, effects: "effects_" + suffix}
	store, err := idem.New(s.d, append([]idem.Option{idem.WithTable(e.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	ctx := context.Background()
	if err := store.Migrate(ctx, s.db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if _, err := s.db.ExecContext(ctx, "CREATE TABLE "+e.effects+" (k VARCHAR(1100) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, table := range []string{e.table, e.effects} {
			if _, err := s.db.ExecContext(context.Background(), "DROP TABLE "+table); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		}
	})
	return e
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}

// effect returns a Func that writes one effect row for key and answers resp.
func (e *env) effect(key string, resp idem.Response) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		q := "INSERT INTO " + e.effects + " (k) VALUES (" + e.d.Placeholder(1) + ")"
		if _, err := tx.ExecContext(ctx, q, hex.EncodeToString([]byte(key))); err != nil {
			return idem.Response{}, err
		}
		return resp, nil
	}
}

// effectCount counts the effect rows of key.
func (e *env) effectCount(t *testing.T, key string) int {
	t.Helper()
	q := "SELECT count(*) FROM " + e.effects + " WHERE k = " + e.d.Placeholder(1)
	var n int
	if err := e.db.QueryRowContext(context.Background(), q, hex.EncodeToString([]byte(key))).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// begin starts a transaction, rolled back at the end of the test if open.
func (e *env) begin(t *testing.T, opts *sql.TxOptions) *sql.Tx {
	t.Helper()
	tx, err := e.db.BeginTx(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// do runs Do in a transaction of its own, which it commits when commit is
// true and Do succeeded, and rolls back otherwise.
func (e *env) do(t *testing.T, key string, hash []byte, fn idem.Func, commit bool) (idem.Result, error) {
	t.Helper()
	tx := e.begin(t, nil)
	res, err := e.store.Do(context.Background(), tx, key, hash, fn)
	if err == nil && commit {
		if cerr := tx.Commit(); cerr != nil {
			t.Fatalf("commit: %v", cerr)
		}
	} else if rerr := tx.Rollback(); rerr != nil {
		t.Fatalf("rollback: %v", rerr)
	}
	return res, err
}

// hold claims key in a transaction that it leaves open, like a request
// still being served.
func (e *env) hold(t *testing.T, key string) *sql.Tx {
	t.Helper()
	tx := e.begin(t, nil)
	res, err := e.store.Do(context.Background(), tx, key, hashA, e.effect(key, created))
	wantOutcome(t, res, err, idem.Claimed)
	return tx
}

// rawRecords reads every record of the table as stored, to show that a call
// changed nothing.
func (e *env) rawRecords(t *testing.T) [][]any {
	t.Helper()
	rows, err := e.db.QueryContext(context.Background(),
		"SELECT request_hash, status, header, body, checksum, created_at, expires_at FROM "+e.table+" ORDER BY created_at")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all [][]any
	for rows.Next() {
		var (
			hash, header, body, sum []byte
			status                  sql.NullInt64
			createdAt, expiresAt    int64
		)
		if err := rows.Scan(&hash, &status, &header, &body, &sum, &createdAt, &expiresAt); err != nil {
			t.Fatal(err)
		}
		all = append(all, []any{hash, status, header, body, sum, createdAt, expiresAt})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return all
}

// writersSerialize reports whether the database lets one transaction write at
// a time, by trying to write in a second transaction while a first one has
// written. A driver may ignore the deadline while it waits for the lock, so
// the probe stops waiting on its own and lets the second transaction finish
// after the first rolls back. The answer is the same for every property of
// one TestDialect, so the first property that asks probes, and the others
// reuse its answer.
func (e *env) writersSerialize(t *testing.T) bool {
	t.Helper()
	e.writers.mu.Lock()
	defer e.writers.mu.Unlock()
	if !e.writers.probed {
		e.writers.serial = e.probeWriters(t)
		e.writers.probed = true
	}
	return e.writers.serial
}

// writers holds what writersSerialize found.
type writers struct {
	mu     sync.Mutex
	probed bool
	serial bool
}

// probeWait is how long the probe of writersSerialize gives the second
// transaction to write. Where writers take turns, that transaction waits
// until the first one ends, which happens only after the probe has given
// up: it never finishes within any bound (or it fails at once, with a busy
// error, where the busy timeout is short). Where they do not, it sends
// BEGIN and one INSERT on a session opened beforehand, which took at most
// a few tens of milliseconds on a loaded 2-core machine under -race; 1 s is
// far above that, so a busy machine is not taken for one that serialises
// writers, which would skip properties. Only a database that serialises
// writers pays the whole second, once per TestDialect.
const probeWait = time.Second

// probeWriters runs the probe of writersSerialize.
func (e *env) probeWriters(t *testing.T) bool {
	t.Helper()
	// The second transaction's session is opened before the first one
	// writes, so that the wait below counts two statements and not the
	// opening of a session.
	conn, err := e.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first := e.begin(t, nil)
	if _, err := e.effect("probe-1", created)(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeWait)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer conn.Close()
		second, err := conn.BeginTx(ctx, nil)
		if err == nil {
			_, err = e.effect("probe-2", created)(ctx, second)
			_ = second.Rollback()
		}
		done <- err
	}()
	var finished bool
	// A driver that honours the deadline answers with an error at
	// probeWait; the half second more is for it to say so, and the timer
	// for a driver that does not.
	select {
	case err = <-done:
		finished = true
	case <-time.After(probeWait + 500*time.Millisecond):
		err = errors.New("still waiting for the lock")
	}
	if rerr := first.Rollback(); rerr != nil {
		t.Fatal(rerr)
	}
	if !finished {
		// Once the first transaction has rolled back, nothing holds the
		// second one up: it ends in milliseconds. The minute only turns a
		// driver that never returns into a failure instead of a hang.
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the second transaction of the probe never ended")
		}
	}
	return err != nil
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
	if got := e.effectCount(t, key); got != n {
		t.Errorf("key %q: %d effect rows, want %d", key, got, n)
	}
}

// mustNotRun is a Func that fails the test if it runs.
func mustNotRun(t *testing.T) idem.Func {
	return func(context.Context, *sql.Tx) (idem.Response, error) {
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
