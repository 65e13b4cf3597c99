package idemtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

// The properties of the contract, each run by TestDriver (and so by
// TestDialect) as a subtest.

func testClaim(t *testing.T, s *suite) {
	c := newClock()
	e := s.env(t, idem.WithClock(c.Now))
	runs := 0
	fn := func(ctx context.Context, tx Tx) (idem.Response, error) {
		runs++
		return e.effect("k", created)(ctx, tx)
	}
	res, err := e.do(t, "k", hashA, fn, true)
	wantOutcome(t, res, err, idem.Claimed)
	sameResponse(t, res.Response, created)
	if runs != 1 {
		t.Errorf("fn ran %d times, want 1", runs)
	}
	if !res.CreatedAt.Equal(c.Now()) || !res.ExpiresAt.Equal(c.Now().Add(idem.DefaultRetention)) {
		t.Errorf("CreatedAt %v, ExpiresAt %v: want the clock and 24 hours later", res.CreatedAt, res.ExpiresAt)
	}
	e.wantEffects(t, "k", 1)
	looked, err := e.store.Lookup(context.Background(), e.db, "k")
	wantOutcome(t, looked, err, idem.Replay)
	sameResponse(t, looked.Response, created)
}

func testReplay(t *testing.T, s *suite) {
	e := s.env(t)
	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	stored := e.rawRecords(t)
	for i := 0; i < 2; i++ {
		again, err := e.do(t, "k", hashA, mustNotRun(t), i == 0)
		wantOutcome(t, again, err, idem.Replay)
		sameResponse(t, again.Response, created)
		if !again.CreatedAt.Equal(res.CreatedAt) || !again.ExpiresAt.Equal(res.ExpiresAt) {
			t.Errorf("replay times %v %v, want %v %v", again.CreatedAt, again.ExpiresAt, res.CreatedAt, res.ExpiresAt)
		}
	}
	if got := e.rawRecords(t); !reflect.DeepEqual(got, stored) {
		t.Errorf("a replay changed the record:\n got %v\nwant %v", got, stored)
	}
	e.wantEffects(t, "k", 1)
}

func testMismatch(t *testing.T, s *suite) {
	e := s.env(t)
	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	stored := e.rawRecords(t)
	res, err = e.do(t, "k", hashB, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.Mismatch)
	if !reflect.DeepEqual(res.Response, idem.Response{}) {
		t.Errorf("a mismatch shows the stored response: %+v", res.Response)
	}
	if got := e.rawRecords(t); !reflect.DeepEqual(got, stored) {
		t.Error("a mismatch changed the record")
	}
	e.wantEffects(t, "k", 1)
}

func testFuncError(t *testing.T, s *suite) {
	e := s.env(t)
	ctx := context.Background()
	declined := errors.New("card declined")
	tx := e.begin(t, nil)
	_, err := e.drv.Do(ctx, e.store, tx, "k", hashA, func(context.Context, Tx) (idem.Response, error) {
		return idem.Response{}, declined
	})
	if !errors.Is(err, declined) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	// Even a caller that commits after the error stores no record.
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Lookup(ctx, e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Lookup: %v, want ErrNotFound", err)
	}
	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
}

func testRollback(t *testing.T, s *suite) {
	e := s.env(t)
	res, err := e.do(t, "k", hashA, e.effect("k", created), false)
	wantOutcome(t, res, err, idem.Claimed)
	if _, err := e.store.Lookup(context.Background(), e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("Lookup after rollback: %v, want ErrNotFound", err)
	}
	res, err = e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	e.wantEffects(t, "k", 1)
}

// testWaitThenReplay holds a claim and commits it while a second request
// waits, with DoTx as a database that serialises writers needs.
func testWaitThenReplay(t *testing.T, s *suite) {
	skipIfConflictAtCommit(t, s)
	e := s.env(t, idem.WithLockTimeout(10*time.Second))
	holder := e.hold(t, "k")
	// The holder commits 200 ms from now, 50 times inside the 10 s lock
	// timeout: a waiter still waiting when load delays the commit by
	// seconds sees it, and Replays.
	after(t, 200*time.Millisecond, func() error { return holder.Commit(context.Background()) })
	start := time.Now()
	res, err := e.drv.DoTx(context.Background(), e.store, nil, "k", hashA, mustNotRun(t))
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, created)
	// The lower bound: the record cannot be read committed before the
	// commit, which comes 200 ms after a sleep that began before start;
	// a Replay sooner read it uncommitted. Load only makes the wait
	// longer, so 150 ms is safe. The upper bound: a waiter that the
	// commit does not wake waits out the 10 s lock timeout (on SQLite,
	// the busy timeout, 10 s in this repository's tests), and a claim
	// that then looks the key up finds the committed record: a Replay
	// after 10 s. The right wait took at most 0.45 s on a loaded 2-core
	// machine under -race; 5 s is ten times that and half the wrong one.
	within(t, "the wait", time.Since(start), 150*time.Millisecond, 5*time.Second)
	e.wantEffects(t, "k", 1)
}

func testWaitThenClaim(t *testing.T, s *suite) {
	e := s.env(t, idem.WithLockTimeout(10*time.Second))
	holder := e.hold(t, "k")
	// The holder rolls back 200 ms from now, 50 times inside the 10 s
	// lock timeout, so even a rollback that load delays by seconds ends
	// the wait; a waiter that missed it would answer InFlight after 10 s.
	after(t, 200*time.Millisecond, func() error { return holder.Rollback(context.Background()) })
	res, err := e.drv.DoTx(context.Background(), e.store, nil, "k", hashA, e.effect("k", created))
	wantOutcome(t, res, err, idem.Claimed)
	e.wantEffects(t, "k", 1)
}

func testLockTimeout(t *testing.T, s *suite) {
	const timeout = 300 * time.Millisecond
	skipIfConflictAtCommit(t, s)
	e := s.env(t, idem.WithLockTimeout(timeout))
	if e.caps.OneWriter {
		t.Skip("the database lets one transaction write at a time: a second request waits at BEGIN and never sees the key in flight")
	}
	ctx := context.Background()
	holder := e.hold(t, "k")
	tx := e.begin(t, nil)
	start := time.Now()
	res, err := e.drv.Do(ctx, e.store, tx, "k", hashA, mustNotRun(t))
	wantOutcome(t, res, err, idem.InFlight)
	// The lower bound: the claim waits the lock timeout at least, and
	// load only makes it longer. The upper bound is inFlightSlack past
	// the timeout: MariaDB rounds the wait up to 1 s, and the answer took
	// at most 1.2 s on a loaded machine, while a claim that ignores the
	// lock timeout waits for a holder that never ends before the test
	// does (MariaDB's session wait, 50 s; PostgreSQL's, forever).
	within(t, "InFlight", time.Since(start), timeout, timeout+inFlightSlack)
	after := "after"
	if s.caps.ShardedByKey {
		// The transaction may write on the key's shard alone.
		after = "k"
	}
	if _, err := e.effect(after, created)(ctx, tx); err != nil {
		t.Fatalf("the transaction is not usable after InFlight: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after InFlight: %v", err)
	}
	e.wantEffects(t, after, 1)
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	e0 := s.env(t, idem.WithLockTimeout(0))
	e0.hold(t, "k")
	start = time.Now()
	res, err = e0.do(t, "k", hashA, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.InFlight)
	// Zero means do not wait. The wrong answers wait: zero taken for the
	// default lock timeout waits 1 s, zero taken for no limit waits for
	// a holder that never ends before the test does. Neither can end
	// before 1 s, which the wait starts counting after start, so 900 ms
	// fails both whatever the load; the right answer, a BEGIN, the claim
	// (and on MariaDB a lookup) and a rollback, took at most 40 ms on a
	// loaded 2-core machine under -race, more than 20 times below it.
	if min := s.caps.MinLockWait; min > 0 {
		// The dialect declares that its database may not wait less than
		// min (MySQL; MariaDB can): up to min, and inFlightSlack more
		// (as above), far below zero taken for no limit.
		within(t, "InFlight with no lock timeout", time.Since(start), 0, min+inFlightSlack)
		return
	}
	within(t, "InFlight with no lock timeout", time.Since(start), 0, 900*time.Millisecond)
}

// skipIfShardedByKey skips a property that needs a transaction on more
// than one shard, for the reason given.
func skipIfShardedByKey(t *testing.T, s *suite, why string) {
	t.Helper()
	if s.caps.ShardedByKey {
		t.Skip("the dialect declares ShardedByKey, and " + why + ": a transaction may touch one shard")
	}
}

// skipIfConflictAtCommit skips a property about a claim that meets a held
// key, which a database that settles the race at commit never does:
// ConflictAtCommit shows what it does instead.
func skipIfConflictAtCommit(t *testing.T, s *suite) {
	t.Helper()
	if s.caps.ConflictAtCommit {
		t.Skip("the dialect declares ConflictAtCommit: no claim meets a held key, and the race is settled at commit (the ConflictAtCommit property)")
	}
}

// testConflictAtCommit races two claims of one key on a database that
// settles the race at commit (Capabilities.ConflictAtCommit): both claims
// win and both Funcs run, and whichever transaction commits second fails
// with a conflict that the dialect classifies as ErrorRetry, leaving the
// first one's record and effect alone. Where claims wait for a held key,
// the waiting properties show what happens instead.
func testConflictAtCommit(t *testing.T, s *suite) {
	if !s.caps.ConflictAtCommit {
		t.Skip("claims meet a held key and wait for it (ConcurrentClaimWaitsThenReplays, LockTimeoutAnswersInFlight)")
	}
	second := idem.Response{Status: 200, Body: []byte("second")}
	for _, c := range []struct {
		name       string
		holderWins bool
	}{{"the holder commits first", true}, {"the later claim commits first", false}} {
		t.Run(c.name, func(t *testing.T) {
			e := s.env(t)
			ctx := context.Background()
			holder := e.hold(t, "k")
			later := e.begin(t, nil)
			res, err := e.drv.Do(ctx, e.store, later, "k", hashA, e.effect("k", second))
			wantOutcome(t, res, err, idem.Claimed)
			winner, loser, want := holder, later, created
			if !c.holderWins {
				winner, loser, want = later, holder, second
			}
			if err := winner.Commit(ctx); err != nil {
				t.Fatalf("the first commit: %v", err)
			}
			if err := loser.Commit(ctx); err == nil || s.d.Classify(err) != dialect.ErrorRetry {
				t.Fatalf("the second commit: %v, want a conflict that the dialect classifies as ErrorRetry", err)
			}
			e.wantEffects(t, "k", 1)
			res, err = e.do(t, "k", hashA, mustNotRun(t), false)
			wantOutcome(t, res, err, idem.Replay)
			sameResponse(t, res.Response, want)
		})
	}
}

// inFlightSlack is how much longer than the lock timeout a claim may take to
// answer InFlight: MariaDB counts the wait in whole seconds and rounds a
// shorter timeout up to 1 s, and a loaded machine adds its own delay (up to
// 0.55 s seen on 2 busy cores under -race). A claim that does not apply the
// lock timeout waits for the holder, which ends only with the test: 50 s on
// MariaDB, whose sessions wait innodb_lock_wait_timeout, and forever on
// PostgreSQL. 5 s is four times the slowest right answer seen and a tenth of
// the shortest wrong one.
const inFlightSlack = 5 * time.Second

// testIsolation lets a transaction at a stricter level read, then loses its
// key to another transaction that commits: the loser must not claim it.
func testIsolation(t *testing.T, s *suite) {
	for _, level := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
		t.Run(level.String(), func(t *testing.T) {
			skipIfConflictAtCommit(t, s)
			skipIfShardedByKey(t, s, "the loser's snapshot comes from a read of a table of its own, on other shards than the key's")
			e := s.env(t)
			if e.caps.OneWriter {
				t.Skip("the database lets one transaction write at a time: no two claims can race")
			}
			ctx := context.Background()
			// The loser reads a table of its own first, which takes its
			// snapshot (or, where SERIALIZABLE reads lock, locks nothing
			// that the winner needs).
			other := "reads_" + randomName()
			if _, err := e.db.ExecContext(ctx, "CREATE TABLE "+other+" (n INT)"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = e.db.ExecContext(context.Background(), "DROP TABLE "+other) })
			tx, err := e.drv.Begin(ctx, &sql.TxOptions{Isolation: level})
			if err != nil {
				t.Skipf("the database does not offer %v: %v", level, err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SELECT count(*) FROM "+other); err != nil {
				t.Fatal(err)
			}
			res, err := e.do(t, "k", hashA, e.effect("k", created), true)
			wantOutcome(t, res, err, idem.Claimed)
			res, err = e.drv.Do(ctx, e.store, tx, "k", hashA, mustNotRun(t))
			switch {
			case err != nil:
				if !errors.Is(err, idem.ErrRetry) {
					t.Fatalf("Do: %v, want an outcome or ErrRetry", err)
				}
			case res.Outcome == idem.Replay:
				sameResponse(t, res.Response, created)
			case res.Outcome != idem.InFlight:
				t.Fatalf("the loser of a race was answered %v", res.Outcome)
			}
		})
	}
}

// testLookupFirst checks DoTx on a store of LookupAlways: a retry of a
// finished request is answered from the read, without waiting for a writer
// that holds another key, and a new, held or expired key is decided in the
// transaction as without the option.
func testLookupFirst(t *testing.T, s *suite) {
	c := newClock()
	e := s.env(t, idem.WithLookupFirst(idem.LookupAlways), idem.WithClock(c.Now), idem.WithRetention(time.Hour), idem.WithLockTimeout(300*time.Millisecond))
	ctx := context.Background()
	serial := e.caps.OneWriter
	res, err := e.drv.DoTx(ctx, e.store, nil, "k", hashA, e.effect("k", created))
	wantOutcome(t, res, err, idem.Claimed)

	holder := e.hold(t, "other")
	start := time.Now()
	res, err = e.drv.DoTx(ctx, e.store, nil, "k", hashA, mustNotRun(t))
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, created)
	res, err = e.drv.DoTx(ctx, e.store, nil, "k", hashB, mustNotRun(t))
	wantOutcome(t, res, err, idem.Mismatch)
	// Where writers take turns, a transaction would wait at BEGIN for the
	// holder, which ends only below: each of DoTx's attempts would wait
	// out the busy timeout (10 s in this repository's tests, 5 s as the
	// README recommends). The two reads took at most 16 ms on a loaded
	// 2-core machine under -race; 3 s is far above that and below a
	// single busy timeout. (Where writers do not take turns, no
	// transaction here waits for the holder, which holds another key.)
	within(t, "the answers beside a writer", time.Since(start), 0, 3*time.Second)

	if !serial && !s.caps.ConflictAtCommit {
		start = time.Now()
		res, err = e.drv.DoTx(ctx, e.store, nil, "other", hashA, mustNotRun(t))
		wantOutcome(t, res, err, idem.InFlight)
		// As in testLockTimeout: at least the lock timeout, and at most
		// inFlightSlack more, far below the wait for a holder that does
		// not end (50 s on MariaDB, forever on PostgreSQL).
		within(t, "InFlight", time.Since(start), 300*time.Millisecond, 300*time.Millisecond+inFlightSlack)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = e.drv.DoTx(ctx, e.store, nil, "other", hashA, mustNotRun(t))
	wantOutcome(t, res, err, idem.Replay)

	// After the window the read finds nothing live, and the transaction
	// takes the key over.
	c.Advance(time.Hour)
	second := idem.Response{Status: 200, Body: []byte("second")}
	res, err = e.drv.DoTx(ctx, e.store, nil, "k", hashB, e.effect("k", second))
	wantOutcome(t, res, err, idem.Claimed)
	res, err = e.drv.DoTx(ctx, e.store, nil, "k", hashB, mustNotRun(t))
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, second)
	e.wantEffects(t, "k", 2)
}

func testExpiry(t *testing.T, s *suite) {
	c := newClock()
	e := s.env(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour), idem.WithLockTimeout(5*time.Second))
	ctx := context.Background()
	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)

	c.Advance(time.Hour - time.Microsecond)
	res, err = e.do(t, "k", hashB, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.Mismatch)

	c.Advance(time.Microsecond)
	if _, err := e.store.Lookup(ctx, e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup of an expired key: %v, want ErrNotFound", err)
	}
	// After the window the key is new, even for another request.
	second := idem.Response{Status: 200, Body: []byte("second")}
	res, err = e.do(t, "k", hashB, e.effect("k", second), true)
	wantOutcome(t, res, err, idem.Claimed)
	res, err = e.do(t, "k", hashB, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, second)

	// Many claimers of an expired key: exactly one wins. The others wait
	// for the winner's commit, up to the 5 s lock timeout; nothing here
	// depends on how long they wait: one that load keeps waiting past it
	// answers InFlight, which is not counted, and the winner, the first to
	// take the key, does not wait at all.
	c.Advance(2 * time.Hour)
	var (
		wg                  sync.WaitGroup
		claimed, mismatched atomic.Int32
	)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.drv.DoTx(ctx, e.store, nil, "k", hashA, e.effect("k", created))
			switch {
			case err != nil && !errors.Is(err, idem.ErrRetry):
				t.Errorf("DoTx: %v, want an outcome or ErrRetry", err)
			case err != nil:
			case res.Outcome == idem.Claimed:
				claimed.Add(1)
			case res.Outcome == idem.Mismatch:
				mismatched.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := claimed.Load(); n != 1 {
		t.Errorf("%d claimers of the expired key won, want 1", n)
	}
	if n := mismatched.Load(); n != 0 {
		t.Errorf("%d concurrent claimers got Mismatch", n)
	}
	e.wantEffects(t, "k", 3)
}

func testPurge(t *testing.T, s *suite) {
	if _, ok := s.d.(dialect.ShardTargeter); !ok {
		skipIfShardedByKey(t, s, "Purge locks the expired records of every shard in one transaction, unless the dialect is a dialect.ShardTargeter")
	}
	c := newClock()
	e := s.env(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
	ctx := context.Background()
	for i := 0; i < 25; i++ {
		res, err := e.do(t, keyName(i), hashA, e.effect(keyName(i), created), true)
		wantOutcome(t, res, err, idem.Claimed)
	}
	c.Advance(time.Hour)
	for i := 25; i < 28; i++ {
		res, err := e.do(t, keyName(i), hashA, e.effect(keyName(i), created), true)
		wantOutcome(t, res, err, idem.Claimed)
	}
	if n, err := e.store.Purge(ctx, e.db, 10); err != nil || n != 25 {
		t.Fatalf("Purge = %d, %v, want the 25 expired records", n, err)
	}
	if n := len(e.rawRecords(t)); n != 3 {
		t.Errorf("%d records left, want the 3 live ones", n)
	}
	if n, err := e.store.Purge(ctx, e.db, 10); err != nil || n != 0 {
		t.Errorf("second Purge = %d, %v, want 0", n, err)
	}
}

// testKeysAreBytes claims keys that a collation, a pad-space rule or a
// Unicode normalisation could take for one another: each is its own key.
func testKeysAreBytes(t *testing.T, s *suite) {
	keys := []string{
		"Key-A", "key-a", "KEY-A",
		"k", "k ", " k", "k\t",
		"strasse", "straße",
		"caf\u00e9", "cafe\u0301",
		"k\x00", "\xff\xfe",
		strings.Repeat("x", idem.MaxStoredKeyBytes),
		strings.Repeat("x", idem.MaxStoredKeyBytes-1) + "y",
	}
	e := s.env(t)
	for i, k := range keys {
		res, err := e.do(t, k, hashA, e.effect(k, idem.Response{Status: 200 + i, Body: []byte(k)}), true)
		// A column that folds keys finds an earlier key's record: a
		// Replay, or, since the record's checksum covers its own key,
		// ErrCorruptRecord.
		if (err == nil && res.Outcome != idem.Claimed) || errors.Is(err, idem.ErrCorruptRecord) {
			t.Fatalf("key %q answered %v (%v), as if an earlier key were the same: the key column must compare bytes, not fold case, trailing spaces or accents as a text collation does", k, res.Outcome, err)
		}
		wantOutcome(t, res, err, idem.Claimed)
	}
	for i, k := range keys {
		res, err := e.do(t, k, hashA, mustNotRun(t), false)
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, idem.Response{Status: 200 + i, Body: []byte(k)})
		e.wantEffects(t, k, 1)
	}
}

func testBadInput(t *testing.T, s *suite) {
	e := s.env(t)
	ctx := context.Background()
	fn := e.effect("k", created)
	tx := e.begin(t, nil)
	for _, c := range []struct {
		name string
		tx   Tx
		key  string
		hash []byte
		fn   Func
		want error
	}{
		{"empty key", tx, "", hashA, fn, idem.ErrInvalidKey},
		{"long key", tx, strings.Repeat("k", idem.MaxStoredKeyBytes+1), hashA, fn, idem.ErrInvalidKey},
		{"empty hash", tx, "k", nil, fn, idem.ErrInvalidHash},
		{"long hash", tx, "k", make([]byte, idem.MaxHashBytes+1), fn, idem.ErrInvalidHash},
		{"nil transaction", nil, "k", hashA, fn, idem.ErrInvalidArgument},
		{"nil Func", tx, "k", hashA, nil, idem.ErrInvalidArgument},
	} {
		if _, err := e.drv.Do(ctx, e.store, c.tx, c.key, c.hash, c.fn); !errors.Is(err, c.want) {
			t.Errorf("%s: Do = %v, want %v", c.name, err, c.want)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.rawRecords(t)); n != 0 {
		t.Errorf("bad input stored %d records", n)
	}
}

func testLargeResponses(t *testing.T, s *suite) {
	const limit = 256 << 10
	e := s.env(t, idem.WithMaxResponseBytes(limit))
	ctx := context.Background()
	body := make([]byte, limit)
	for i := range body {
		body[i] = byte(rand.N(256))
	}
	fits := idem.Response{Status: 200, Body: body}
	res, err := e.do(t, "fits", hashA, e.effect("fits", fits), true)
	wantOutcome(t, res, err, idem.Claimed)
	res, err = e.do(t, "fits", hashA, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, fits)

	tx := e.begin(t, nil)
	big := idem.Response{Status: 200, Header: http.Header{"X": {"y"}}, Body: body}
	if _, err := e.drv.Do(ctx, e.store, tx, "big", hashA, e.effect("big", big)); !errors.Is(err, idem.ErrResponseTooLarge) {
		t.Fatalf("Do: %v, want ErrResponseTooLarge", err)
	}
	if err := tx.Commit(ctx); err != nil { // a careless caller
		t.Fatal(err)
	}
	if _, err := e.store.Lookup(ctx, e.db, "big"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup: %v, want ErrNotFound: nothing stored", err)
	}
}

func testCorruptRecord(t *testing.T, s *suite) {
	skipIfShardedByKey(t, s, "the record is damaged by an UPDATE of the whole table, on every shard")
	e := s.env(t)
	ctx := context.Background()
	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	// Change the body and keep the checksum.
	if _, err := e.db.ExecContext(ctx, "UPDATE "+e.table+" SET body = "+e.d.Placeholder(1), []byte(`{"order":2}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.do(t, "k", hashA, mustNotRun(t), false); !errors.Is(err, idem.ErrCorruptRecord) {
		t.Errorf("Do: %v, want ErrCorruptRecord", err)
	}
	if _, err := e.store.Lookup(ctx, e.db, "k"); !errors.Is(err, idem.ErrCorruptRecord) {
		t.Errorf("Lookup: %v, want ErrCorruptRecord", err)
	}
}

func testRefusable(t *testing.T, s *suite) {
	e := s.env(t)
	declined := idem.Response{Status: 402, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"declined"}`)}
	refuse := func(ctx context.Context, tx Tx) (idem.Response, error) {
		if _, err := e.effect("k", created)(ctx, tx); err != nil {
			return idem.Response{}, err
		}
		return idem.Response{}, idem.Refuse(declined)
	}
	res, err := e.do(t, "k", hashA, e.drv.Refusable(refuse), true)
	wantOutcome(t, res, err, idem.Claimed)
	sameResponse(t, res.Response, declined)
	e.wantEffects(t, "k", 0)
	res, err = e.do(t, "k", hashA, mustNotRun(t), false)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, declined)

	// A Func under Refusable that does not refuse stores its response.
	res, err = e.do(t, "k2", hashA, e.drv.Refusable(e.effect("k2", created)), true)
	wantOutcome(t, res, err, idem.Claimed)
	e.wantEffects(t, "k2", 1)
}

// testTorture races 32 goroutines on the same 48 keys, a quarter through
// DoTx on a store of LookupNever, a quarter through DoTx on a
// store of LookupAlways, and half through Do in transactions of their
// own, each writing its effect in the claim's transaction. The policies are
// fixed, so that one quarter always claims and the other always reads first
// whatever share of the calls are retries (most of them are, here, and a
// store of the default policy would soon read first too).
//
// No answer here depends on how long anything waits. A claim that waits
// longer than the 200 ms lock timeout for a holder answers InFlight, which
// is allowed. A transaction that waits for the database's write lock longer
// than its busy timeout (SQLite) gets an error that the dialect classifies as
// a conflict: DoTx retries it, and this test, the caller of the plain Do,
// counts it as ErrRetry, as Do itself does for its own statements. That
// happens on a loaded machine: SQLite's busy handler is no queue, a waiter
// sleeps in steps of up to 100 ms and gets the lock only if it is free when
// it wakes, so among 32 writers one BEGIN can lose every time until its
// busy timeout (10 s in this repository's tests) runs out. What the test
// checks, one claim and one effect per key, no Mismatch, the stored body in
// every Replay, does not depend on who waited how long.
func testTorture(t *testing.T, s *suite) {
	const (
		workers = 32
		keys    = 48
	)
	e := s.env(t, idem.WithLockTimeout(200*time.Millisecond), idem.WithLookupFirst(idem.LookupNever))
	lookupFirst, err := idem.New(s.d, idem.WithTable(e.table), idem.WithLockTimeout(200*time.Millisecond), idem.WithLookupFirst(idem.LookupAlways))
	if err != nil {
		t.Fatal(err)
	}
	// Room for every worker at once on database/sql, whose pool SQLDriver
	// draws from; a Driver with a pool of its own sizes that itself (see
	// TestDriver).
	e.db.SetMaxOpenConns(workers + 4)
	ctx := context.Background()
	var (
		wg         sync.WaitGroup
		outcomes   [idem.InFlight + 1]atomic.Int32
		retries    atomic.Int32
		ownRetries atomic.Int32 // of them, conflicts at the test's own BEGIN or COMMIT
	)
	// conflict makes an error of the test's own BEGIN or COMMIT that the
	// dialect classifies as a conflict an ErrRetry, which is what Do
	// returns for the same error from its own statements. Do's errors
	// do not pass through here: one that should be ErrRetry and is not
	// stays a failure.
	conflict := func(err error) error {
		if s.d.Classify(err) == dialect.ErrorRetry {
			ownRetries.Add(1)
			return fmt.Errorf("%w: %w", idem.ErrRetry, err)
		}
		return err
	}
	call := func(w int, key string) (idem.Result, error) {
		fn := func(ctx context.Context, tx Tx) (idem.Response, error) {
			// Hold the key while others arrive. It only makes races more
			// likely; no outcome depends on how long it lasts.
			time.Sleep(rand.N(2 * time.Millisecond))
			return e.effect(key, created)(ctx, tx)
		}
		switch w % 4 {
		case 0:
			return e.drv.DoTx(ctx, e.store, nil, key, hashA, fn)
		case 2:
			return e.drv.DoTx(ctx, lookupFirst, nil, key, hashA, fn)
		}
		tx, err := e.drv.Begin(ctx, nil)
		if err != nil {
			return idem.Result{}, conflict(err)
		}
		defer tx.Rollback(ctx)
		res, err := e.drv.Do(ctx, e.store, tx, key, hashA, fn)
		if err == nil && res.Outcome == idem.Claimed {
			if err := tx.Commit(ctx); err != nil {
				return idem.Result{}, conflict(err)
			}
		}
		return res, err
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, k := range rand.Perm(keys) {
				res, err := call(w, keyName(k))
				switch {
				case errors.Is(err, idem.ErrRetry):
					retries.Add(1)
				case err != nil:
					t.Errorf("%s: %v, want an outcome or ErrRetry", keyName(k), err)
				case res.Outcome == idem.Mismatch:
					t.Errorf("%s: Mismatch for the same request", keyName(k))
				case res.Outcome == idem.Replay:
					if !bytes.Equal(res.Response.Body, created.Body) {
						t.Errorf("%s: replayed %q", keyName(k), res.Response.Body)
					}
					outcomes[res.Outcome].Add(1)
				default:
					outcomes[res.Outcome].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for k := 0; k < keys; k++ {
		e.wantEffects(t, keyName(k), 1)
	}
	if n := outcomes[idem.Claimed].Load(); n != keys {
		t.Errorf("%d calls claimed, want %d, one per key", n, keys)
	}
	t.Logf("%d calls: claimed %d, replay %d, in flight %d, ErrRetry %d (%d at the test's own BEGIN or COMMIT)",
		workers*keys, outcomes[idem.Claimed].Load(), outcomes[idem.Replay].Load(), outcomes[idem.InFlight].Load(), retries.Load(), ownRetries.Load())
}
