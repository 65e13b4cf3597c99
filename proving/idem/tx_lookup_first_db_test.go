package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestLookupFirstAdapts counts what DoTx sends on every database while a
// Store of the default policy sees its traffic change: a new key and its
// first 31 retries go through the transaction as they would without the
// policy; once the Store has seen 32 calls, most of them retries, a retry
// is the lookup alone, with no BEGIN, and a new key the lookup and then the
// claim; after a run of new keys it stops reading first. What each call
// sends must match what LooksUpFirst said before it, and an answer from the
// lookup must show in the Event as no attempt. A Store made
// LookupNever on the same table never reads first, however many
// retries it answers.
func TestLookupFirstAdapts(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		e, c := countStatements(t, tg)
		ctx := context.Background()
		var last idem.Event
		// The default policy: only the table and an observer are set.
		store, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithObserver(func(_ context.Context, ev idem.Event) { last = ev }))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		// call runs DoTx on s and returns what it sent, and what
		// LooksUpFirst said just before.
		call := func(s *idem.Store, key string, hash []byte, want idem.Outcome) (sent []string, first bool) {
			t.Helper()
			fn := dbtest.MustNotRun(t)
			if want == idem.Claimed {
				fn = e.Effect(key, dbtest.Created)
			}
			first = s.LooksUpFirst()
			c.take()
			res, err := s.DoTx(ctx, e.DB, nil, key, hash, fn)
			sent, _ = c.take()
			dbtest.WantOutcome(t, res, err, want)
			if s == store {
				calls++
				// A retry answered by the lookup ran no transaction.
				wantAttempts := 1
				if first && want != idem.Claimed {
					wantAttempts = 0
				}
				if last.Attempts != wantAttempts {
					t.Fatalf("call %d (%v, looked up first %v): Event.Attempts %d, want %d", calls, want, first, last.Attempts, wantAttempts)
				}
			}
			return sent, first
		}
		wantSent := func(what string, sent, want []string) {
			t.Helper()
			if !reflect.DeepEqual(sent, want) {
				t.Fatalf("call %d, %s: DoTx sent %v, want %v", calls, what, sent, want)
			}
		}

		// A new key, through the transaction: the path to compare with.
		claimTx, first := call(store, "k", dbtest.HashA, idem.Claimed)
		if first || len(claimTx) == 0 || claimTx[0] != "begin" {
			t.Fatalf("a new Store's first DoTx: looks up first %v, sent %v; want a transaction", first, claimTx)
		}
		// Its retries, and requests with another body under the same key,
		// all through the transaction until the Store has seen 32 calls.
		var retryTx []string
		for calls < 32 {
			hash, want := dbtest.HashA, idem.Replay
			if calls%2 == 0 {
				hash, want = dbtest.HashB, idem.Mismatch
			}
			sent, first := call(store, "k", hash, want)
			if first {
				t.Fatalf("call %d: looks up first before the Store saw 32 calls", calls)
			}
			if retryTx == nil {
				retryTx = sent
				if len(sent) == 0 || sent[0] != "begin" {
					t.Fatalf("call %d, a retry through the transaction: DoTx sent %v", calls, sent)
				}
			}
			wantSent("a retry through the transaction", sent, retryTx)
		}
		if !store.LooksUpFirst() {
			t.Fatalf("after a new key and 31 retries: does not look up first")
		}

		// Now a retry is the lookup alone, and so is another body: in a
		// read-only transaction of its own where a session may read
		// uncommitted rows (TestOutsideReadSeesCommittedOnly).
		lookup := []string{"Lookup"}
		if dialect.CapabilitiesOf(tg.Dialect).ReadsUncommitted {
			lookup = []string{"begin", "Lookup"}
		}
		for _, r := range []struct {
			hash []byte
			want idem.Outcome
		}{{dbtest.HashA, idem.Replay}, {dbtest.HashB, idem.Mismatch}} {
			sent, first := call(store, "k", r.hash, r.want)
			if !first {
				t.Fatalf("call %d: does not look up first", calls)
			}
			wantSent("a retry answered by the lookup", sent, lookup)
		}

		// New keys pay the lookup on top of the transaction, until the
		// estimate falls to 0.3: from about 0.88, in some 17 new keys.
		fresh := 0
		for store.LooksUpFirst() {
			if fresh++; fresh > 25 {
				t.Fatalf("still looks up first after %d new keys", fresh-1)
			}
			key := "new-" + string(rune('a'+fresh))
			sent, _ := call(store, key, dbtest.HashA, idem.Claimed)
			wantSent("a new key after the lookup", sent, slices.Concat(lookup, claimTx))
		}
		t.Logf("looked up first from call 33 on, and stopped after %d new keys", fresh)
		if fresh < 10 {
			t.Errorf("stopped looking up first after %d new keys, want some 17", fresh)
		}

		// And the transaction again, for new keys and retries alike.
		sent, _ := call(store, "after", dbtest.HashA, idem.Claimed)
		wantSent("a new key after the Store stopped looking up first", sent, claimTx)
		sent, _ = call(store, "k", dbtest.HashA, idem.Replay)
		wantSent("a retry after the Store stopped looking up first", sent, retryTx)

		// LookupNever never reads first.
		never, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithLookupFirst(idem.LookupNever))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64; i++ {
			sent, first := call(never, "k", dbtest.HashA, idem.Replay)
			if first {
				t.Fatalf("LookupNever, retry %d: looks up first", i+1)
			}
			wantSent("a retry on a Store of LookupNever", sent, retryTx)
		}
		if never.LooksUpFirst() {
			t.Fatal("LookupNever: looks up first after 64 retries")
		}
	})
}

// TestLookupPoliciesAgreeOnHeldKey asks for a key while another
// transaction, left open, holds it, through three callers at once: DoTx on
// a Store of LookupNever, which claims in its transaction; DoTx on one of
// LookupAlways, which reads first; and Do in a transaction of its own. It
// logs what each answers, on every database.
//
// The holder replays a finished key: on the MySQL family (TiDB in its
// pessimistic mode) its claim locked the record, and a claim waits for it
// in vain, and on SQLite it holds the write lock, for which a transaction
// waits at BEGIN in vain. Both DoTx calls must answer Replay, byte for
// byte, or Mismatch for another request hash: the record is finished and
// committed. Do answers InFlight there, and Replay where the claim does
// not wait for the holder (PostgreSQL, TiDB in optimistic mode); on SQLite
// its transaction cannot begin, and it is left out.
//
// The holder has claimed a new key and stored its response, uncommitted:
// every caller must answer InFlight, which on SQLite is ErrRetry for DoTx.
// TiDB in optimistic mode is left out here: there a claim does not see the
// holder, and the race is settled at commit (TestDialect/ConflictAtCommit).
func TestLookupPoliciesAgreeOnHeldKey(t *testing.T) {
	dbtest.ForEachPooled(t, func(t *testing.T, tg target) {
		if tg.Family == "sqlite" {
			// Each DoTx attempt waits the busy timeout at BEGIN, and
			// every one of them waits in vain, since the holder ends
			// only once all callers have answered.
			tg = dbtest.SQLite("_txlock=immediate&_pragma=busy_timeout(50)&_pragma=journal_mode(WAL)")
		}
		atCommit := dialect.CapabilitiesOf(tg.Dialect).ConflictAtCommit
		// The MySQL family waits for the holder 1 s, the rounded lock
		// timeout; PostgreSQL 100 ms.
		const lockTimeout = 100 * time.Millisecond
		e := setup(t, tg, idem.WithLockTimeout(lockTimeout))
		ctx := context.Background()
		store := func(p idem.LookupPolicy) *idem.Store {
			s, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithLockTimeout(lockTimeout), idem.WithLookupFirst(p))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		never, always := store(idem.LookupNever), store(idem.LookupAlways)
		type answer struct {
			res idem.Result
			err error
		}
		// ask runs the callers at once, each with hash, while the holder
		// holds key, and returns their answers by name.
		ask := func(t *testing.T, key string, hash []byte) map[string]answer {
			callers := map[string]func() (idem.Result, error){
				"LookupNever": func() (idem.Result, error) {
					return never.DoTx(ctx, e.DB, nil, key, hash, dbtest.MustNotRun(t))
				},
				"LookupAlways": func() (idem.Result, error) {
					return always.DoTx(ctx, e.DB, nil, key, hash, dbtest.MustNotRun(t))
				},
			}
			if tg.Family != "sqlite" {
				callers["Do"] = func() (idem.Result, error) {
					tx, err := e.DB.BeginTx(ctx, nil)
					if err != nil {
						return idem.Result{}, err
					}
					defer func() { _ = tx.Rollback() }()
					return never.Do(ctx, tx, key, hash, dbtest.MustNotRun(t))
				}
			}
			var (
				mu      sync.Mutex
				wg      sync.WaitGroup
				answers = map[string]answer{}
			)
			for name, call := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := call()
					mu.Lock()
					answers[name] = answer{res, err}
					mu.Unlock()
				}()
			}
			wg.Wait()
			for _, name := range []string{"LookupNever", "LookupAlways", "Do"} {
				if a, ok := answers[name]; ok {
					t.Logf("%s, hash %x…: %s answers %v, %v", key, hash[:4], name, a.res.Outcome, a.err)
				}
			}
			return answers
		}
		want := func(t *testing.T, a answer, caller string, outcome idem.Outcome) {
			t.Helper()
			if a.err != nil || a.res.Outcome != outcome {
				t.Errorf("%s answers %v, %v; want %v", caller, a.res.Outcome, a.err, outcome)
				return
			}
			if outcome == idem.Replay {
				dbtest.SameResponse(t, a.res.Response, dbtest.Created)
			}
		}

		t.Run("ReplayHeld", func(t *testing.T) {
			res, err := e.Do(t, "done", dbtest.HashA, e.Effect("done", dbtest.Created), true)
			dbtest.WantOutcome(t, res, err, idem.Claimed)
			holder := e.Begin(t, nil)
			res, err = e.Store.Do(ctx, holder, "done", dbtest.HashA, dbtest.MustNotRun(t))
			dbtest.WantOutcome(t, res, err, idem.Replay)
			doWaits := tg.Family == "mysql" && !atCommit
			for _, r := range []struct {
				hash []byte
				want idem.Outcome
			}{{dbtest.HashA, idem.Replay}, {dbtest.HashB, idem.Mismatch}} {
				answers := ask(t, "done", r.hash)
				want(t, answers["LookupNever"], "LookupNever", r.want)
				want(t, answers["LookupAlways"], "LookupAlways", r.want)
				if a, ok := answers["Do"]; ok {
					if doWaits {
						want(t, a, "Do", idem.InFlight)
					} else {
						want(t, a, "Do", r.want)
					}
				}
			}
			if err := holder.Rollback(); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("ClaimHeld", func(t *testing.T) {
			if atCommit {
				t.Skip("a claim does not see a key held uncommitted: TestDialect/ConflictAtCommit")
			}
			holder := e.Hold(t, "held", dbtest.HashA, dbtest.Created)
			answers := ask(t, "held", dbtest.HashA)
			for name, a := range answers {
				if tg.Family == "sqlite" {
					if !errors.Is(a.err, idem.ErrRetry) {
						t.Errorf("%s answers %v, %v; want ErrRetry", name, a.res.Outcome, a.err)
					}
					continue
				}
				want(t, a, name, idem.InFlight)
			}
			if err := holder.Rollback(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// TestOutsideReadSeesCommittedOnly runs DoTx, with either lookup policy, on
// a connection whose session reads uncommitted rows (a server's or a
// DSN's setting), while another transaction holds a finished record
// uncommitted. The reads that DoTx makes outside its transactions (first,
// and after a claim that waited in vain) must not answer Replay from it:
// the holder may still roll back, and its effect with it. They must leave
// the session's isolation level as they found it. On Vitess, whose vtgate
// keeps a transaction's isolation level for the session, so that a read
// cannot choose its own, the Store refuses to begin a transaction at READ
// UNCOMMITTED instead.
func TestOutsideReadSeesCommittedOnly(t *testing.T) {
	each := func(f func(t *testing.T, tg target)) {
		dbtest.ForEachPooled(t, f)
		dbtest.ForEachVitess(t, f)
	}
	each(func(t *testing.T, tg target) {
		if tg.Family == "sqlite" {
			t.Skip("SQLite never shows one connection another's uncommitted writes")
		}
		if dialect.CapabilitiesOf(tg.Dialect).ConflictAtCommit {
			t.Skip("a claim does not see a key held uncommitted: TestDialect/ConflictAtCommit")
		}
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		ctx := context.Background()
		if dialect.CapabilitiesOf(tg.Dialect).KeepsIsolation {
			ru := &sql.TxOptions{Isolation: sql.LevelReadUncommitted}
			_, err := e.Store.DoTx(ctx, e.DB, ru, "held", dbtest.HashA, dbtest.MustNotRun(t))
			if !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("DoTx at READ UNCOMMITTED: %v, want ErrInvalidArgument", err)
			}
			_, err = e.Store.Run(ctx, e.DB, ru, "held", dbtest.HashA, idem.Final("final", dbtest.MustNotRun(t)))
			if !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("Run at READ UNCOMMITTED: %v, want ErrInvalidArgument", err)
			}
			_, err = e.Store.Resume(ctx, e.DB, ru, func(context.Context, string) ([]idem.Step, error) { return nil, nil })
			if !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("Resume at READ UNCOMMITTED: %v, want ErrInvalidArgument", err)
			}
			return
		}
		holder := e.Hold(t, "held", dbtest.HashA, dbtest.Created)
		defer func() { _ = holder.Rollback() }()
		db := tg.Open(t)
		db.SetMaxOpenConns(1) // every statement below on the one session
		uncommitted := map[string]string{
			"postgres": "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
			"mysql":    "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
		}[tg.Family]
		if _, err := db.ExecContext(ctx, uncommitted); err != nil {
			t.Skipf("the server has no such isolation level: %v", err)
		}
		for _, p := range []idem.LookupPolicy{idem.LookupNever, idem.LookupAlways} {
			s, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithLockTimeout(100*time.Millisecond), idem.WithLookupFirst(p))
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.DoTx(ctx, db, nil, "held", dbtest.HashA, dbtest.MustNotRun(t))
			if err != nil || res.Outcome != idem.InFlight {
				t.Errorf("%v: %v, %v; want InFlight while the holder has not committed", p, res.Outcome, err)
			}
		}
		if res, err := e.Store.Lookup(ctx, db, "held"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup: %v, %v; want ErrNotFound while the holder has not committed", res.Outcome, err)
		}
		if tg.Family == "mysql" {
			// The reads left the session as they found it, also where
			// vtgate keeps a transaction's isolation level for it.
			level := sessionIsolation(t, db)
			if level != "READ-UNCOMMITTED" {
				t.Errorf("after DoTx the session reads at %s, want it left at READ-UNCOMMITTED", level)
			}
		}
	})
}

// sessionIsolation returns the isolation level of db's session on the
// MySQL family, by the name of the variable that the server has.
func sessionIsolation(t *testing.T, db *sql.DB) string {
	t.Helper()
	var level string
	err := db.QueryRow("SELECT @@SESSION.transaction_isolation").Scan(&level)
	if err != nil {
		if err := db.QueryRow("SELECT @@SESSION.tx_isolation").Scan(&level); err != nil {
			t.Fatal(err)
		}
	}
	return level
}
