package idem_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

var (
	hashA = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":88}`))
	hashB = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":89}`))
)

// created is a response with every part that must survive a replay.
var created = idem.Response{
	Status: 201,
	Header: http.Header{
		"Content-Type": {"application/json"},
		"Location":     {"/orders/1"},
		"X-Multi":      {"a", "", "b"},
	},
	Body: []byte("{\"order\":1}\x00\xff\n"),
}

func sameResponse(t *testing.T, got, want idem.Response) {
	t.Helper()
	if got.Status != want.Status || !reflect.DeepEqual(got.Header, want.Header) || !bytes.Equal(got.Body, want.Body) {
		t.Errorf("response = %d %v %q, want %d %v %q", got.Status, got.Header, got.Body, want.Status, want.Header, want.Body)
	}
}

func wantOutcome(t *testing.T, res idem.Result, err error, want idem.Outcome) {
	t.Helper()
	if err != nil {
		t.Fatalf("Do: %v, want outcome %v", err, want)
	}
	if res.Outcome != want {
		t.Fatalf("outcome = %v, want %v", res.Outcome, want)
	}
}

// rawRecord reads a record's columns as stored, to show that a call changed
// nothing.
func (e *env) rawRecord(t *testing.T, key string) []any {
	t.Helper()
	keyCol := "key"
	if e.tg.dialect.Name() == "mysql" {
		keyCol = "`key`"
	}
	q := fmt.Sprintf("SELECT request_hash, status, header, body, checksum, created_at, expires_at FROM %s WHERE %s = %s", e.table, keyCol, e.placeholder(1))
	var (
		hash, header, body, sum []byte
		status                  sql.NullInt64
		createdAt, expiresAt    int64
	)
	err := e.db.QueryRowContext(context.Background(), q, []byte(key)).Scan(&hash, &status, &header, &body, &sum, &createdAt, &expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return []any{hash, status, header, body, sum, createdAt, expiresAt}
}

func (e *env) placeholder(n int) string { return e.tg.dialect.Placeholder(n) }

func TestClaimThenReplay(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		ctx := context.Background()
		calls := 0
		fn := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			calls++
			return e.effect("k1", created)(ctx, tx)
		}
		before := time.Now()
		res, err := e.do(t, "k1", hashA, fn, true)
		wantOutcome(t, res, err, idem.Claimed)
		sameResponse(t, res.Response, created)
		if calls != 1 {
			t.Errorf("fn ran %d times, want 1", calls)
		}
		if res.CreatedAt.Before(before.Add(-time.Millisecond)) || !res.ExpiresAt.Equal(res.CreatedAt.Add(idem.DefaultRetention)) {
			t.Errorf("CreatedAt %v, ExpiresAt %v: want now and now + 24h", res.CreatedAt, res.ExpiresAt)
		}
		stored := e.rawRecord(t, "k1")

		tx := e.begin(t, nil)
		again, err := e.store.Do(ctx, tx, "k1", hashA, mustNotRun(t))
		wantOutcome(t, again, err, idem.Replay)
		sameResponse(t, again.Response, created)
		if !again.CreatedAt.Equal(res.CreatedAt) || !again.ExpiresAt.Equal(res.ExpiresAt) {
			t.Errorf("replay times %v %v, want %v %v", again.CreatedAt, again.ExpiresAt, res.CreatedAt, res.ExpiresAt)
		}
		if tg.dialect.Name() == "postgres" {
			// A transaction that wrote anything has a transaction id.
			var xid sql.NullInt64
			if err := tx.QueryRowContext(ctx, "SELECT txid_current_if_assigned()").Scan(&xid); err != nil {
				t.Fatal(err)
			}
			if xid.Valid {
				t.Errorf("the replay wrote: its transaction has id %d", xid.Int64)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := e.rawRecord(t, "k1"); !reflect.DeepEqual(got, stored) {
			t.Errorf("replay changed the record:\n got %v\nwant %v", got, stored)
		}
		if n := e.effectCount(t, "k1"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
		looked, err := e.store.Lookup(ctx, e.db, "k1")
		wantOutcome(t, looked, err, idem.Replay)
		sameResponse(t, looked.Response, created)
	})
}

func TestRollbackFreesKey(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		res, err := e.do(t, "k", hashA, e.effect("k", created), false)
		wantOutcome(t, res, err, idem.Claimed)
		if _, err := e.store.Lookup(context.Background(), e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Lookup after rollback: %v, want ErrNotFound", err)
		}
		res, err = e.do(t, "k", hashA, e.effect("k", created), true)
		wantOutcome(t, res, err, idem.Claimed)
		if n := e.effectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

func TestFuncErrorStoresNothing(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		ctx := context.Background()
		declined := errors.New("card declined")
		tx := e.begin(t, nil)
		_, err := e.store.Do(ctx, tx, "k", hashA, func(context.Context, *sql.Tx) (idem.Response, error) {
			return idem.Response{}, declined
		})
		if !errors.Is(err, declined) {
			t.Fatalf("Do = %v, want fn's error", err)
		}
		// Even a caller that commits after the error stores no record.
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Lookup(ctx, e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Lookup: %v, want ErrNotFound", err)
		}
		res, err := e.do(t, "k", hashA, e.effect("k", created), true)
		wantOutcome(t, res, err, idem.Claimed)
	})
}

func TestMismatch(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		res, err := e.do(t, "k", hashA, e.effect("k", created), true)
		wantOutcome(t, res, err, idem.Claimed)
		stored := e.rawRecord(t, "k")
		res, err = e.do(t, "k", hashB, mustNotRun(t), true)
		wantOutcome(t, res, err, idem.Mismatch)
		if res.Response.Status != 0 || res.Response.Body != nil || res.Response.Header != nil {
			t.Errorf("a mismatch shows the stored response: %+v", res.Response)
		}
		if got := e.rawRecord(t, "k"); !reflect.DeepEqual(got, stored) {
			t.Errorf("mismatch changed the record")
		}
		if n := e.effectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

func TestLookupNotFound(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		if _, err := e.store.Lookup(context.Background(), e.db, "never"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Lookup: %v, want ErrNotFound", err)
		}
	})
}

// TestKeysAreBytes checks that keys that a collation, a pad-space rule or a
// Unicode normalisation might take for one another are different keys.
func TestKeysAreBytes(t *testing.T) {
	keys := []string{
		"Key-A", "key-a", "KEY-A",
		"k", "k ", " k", "k\t",
		"strasse", "straße",
		"caf\u00e9", "cafe\u0301",
		"k\x00", "\xff\xfe",
		strings.Repeat("x", idem.MaxKeyBytes),
		strings.Repeat("x", idem.MaxKeyBytes-1) + "y",
	}
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		for i, k := range keys {
			resp := idem.Response{Status: 200 + i, Body: []byte(k)}
			res, err := e.do(t, k, hashA, e.effect(k, resp), true)
			wantOutcome(t, res, err, idem.Claimed)
		}
		for i, k := range keys {
			res, err := e.do(t, k, hashA, mustNotRun(t), false)
			wantOutcome(t, res, err, idem.Replay)
			sameResponse(t, res.Response, idem.Response{Status: 200 + i, Body: []byte(k)})
			if n := e.effectCount(t, k); n != 1 {
				t.Errorf("key %q: %d effect rows, want 1", k, n)
			}
		}
	})
}

func TestCorruptRecordIsNotReplayed(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		ctx := context.Background()
		res, err := e.do(t, "k", hashA, e.effect("k", created), true)
		wantOutcome(t, res, err, idem.Claimed)
		// Change the body, keep the checksum.
		keyCol := "key"
		if tg.dialect.Name() == "mysql" {
			keyCol = "`key`"
		}
		q := fmt.Sprintf("UPDATE %s SET body = %s WHERE %s = %s", e.table, e.placeholder(1), keyCol, e.placeholder(2))
		if _, err := e.db.ExecContext(ctx, q, []byte(`{"order":2}`), []byte("k")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.do(t, "k", hashA, mustNotRun(t), false); !errors.Is(err, idem.ErrCorruptRecord) {
			t.Errorf("Do: %v, want ErrCorruptRecord", err)
		}
		if _, err := e.store.Lookup(ctx, e.db, "k"); !errors.Is(err, idem.ErrCorruptRecord) {
			t.Errorf("Lookup: %v, want ErrCorruptRecord", err)
		}
	})
}

func TestResponseTooLarge(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithMaxResponseBytes(100))
		ctx := context.Background()
		fits := idem.Response{Status: 200, Body: bytes.Repeat([]byte("a"), 100)}
		res, err := e.do(t, "fits", hashA, e.effect("fits", fits), true)
		wantOutcome(t, res, err, idem.Claimed)

		tx := e.begin(t, nil)
		big := idem.Response{Status: 200, Body: bytes.Repeat([]byte("a"), 101)}
		if _, err := e.store.Do(ctx, tx, "big", hashA, e.effect("big", big)); !errors.Is(err, idem.ErrResponseTooLarge) {
			t.Fatalf("Do: %v, want ErrResponseTooLarge", err)
		}
		if err := tx.Commit(); err != nil { // a careless caller
			t.Fatal(err)
		}
		if _, err := e.store.Lookup(ctx, e.db, "big"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup: %v, want ErrNotFound: nothing stored", err)
		}
	})
}

func TestRefusable(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		declined := idem.Response{Status: 402, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"error":"declined"}`)}
		refuse := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			if _, err := e.effect("k", created)(ctx, tx); err != nil {
				return idem.Response{}, err
			}
			return idem.Response{}, idem.Refuse(declined)
		}
		res, err := e.do(t, "k", hashA, idem.Refusable(refuse), true)
		wantOutcome(t, res, err, idem.Claimed)
		sameResponse(t, res.Response, declined)
		if n := e.effectCount(t, "k"); n != 0 {
			t.Errorf("%d effect rows, want the refused write undone", n)
		}
		res, err = e.do(t, "k", hashA, mustNotRun(t), false)
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, declined)

		// Without Refusable, a refusal is an error and nothing is stored.
		if _, err := e.do(t, "k2", hashA, refuse, true); err == nil || !strings.Contains(err.Error(), "Refusable") {
			t.Errorf("Do = %v, want an error that names Refusable", err)
		}
		if _, err := e.store.Lookup(context.Background(), e.db, "k2"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup: %v, want ErrNotFound", err)
		}
		// A successful Func under Refusable stores its response.
		res, err = e.do(t, "k3", hashA, idem.Refusable(e.effect("k3", created)), true)
		wantOutcome(t, res, err, idem.Claimed)
		if n := e.effectCount(t, "k3"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

// clock is a settable clock for WithClock.
type clock struct{ now atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.now.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.now.Load()) }
func (c *clock) Advance(d time.Duration) { c.now.Add(int64(d)) }

func TestExpiry(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		c := newClock()
		e := setup(t, tg, idem.WithClock(c.Now), idem.WithRetention(time.Hour), idem.WithLockTimeout(5*time.Second))
		ctx := context.Background()
		res, err := e.do(t, "k", hashA, e.effect("k", created), true)
		wantOutcome(t, res, err, idem.Claimed)
		if !res.ExpiresAt.Equal(c.Now().Add(time.Hour)) {
			t.Errorf("ExpiresAt = %v, want clock + 1h", res.ExpiresAt)
		}

		c.Advance(time.Hour - time.Microsecond)
		res, err = e.do(t, "k", hashB, mustNotRun(t), false)
		wantOutcome(t, res, err, idem.Mismatch)

		c.Advance(time.Microsecond)
		if _, err := e.store.Lookup(ctx, e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup of an expired key: %v, want ErrNotFound", err)
		}
		// After the window the key is new: even another request may claim it.
		second := idem.Response{Status: 200, Body: []byte("second")}
		res, err = e.do(t, "k", hashB, e.effect("k", second), true)
		wantOutcome(t, res, err, idem.Claimed)
		res, err = e.do(t, "k", hashB, mustNotRun(t), false)
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, second)

		// Many claimers of an expired key: exactly one wins.
		c.Advance(2 * time.Hour)
		const n = 16
		var (
			wg       sync.WaitGroup
			ran      atomic.Int32
			outcomes sync.Map
		)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.store.DoTx(ctx, e.db, nil, "k", hashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					ran.Add(1)
					return e.effect("k", created)(ctx, tx)
				})
				switch {
				case err == nil:
					v, _ := outcomes.LoadOrStore(res.Outcome, new(atomic.Int32))
					v.(*atomic.Int32).Add(1)
				case !errors.Is(err, idem.ErrRetry):
					t.Errorf("DoTx: %v, want an outcome or ErrRetry", err)
				}
			}()
		}
		wg.Wait()
		claimed := 0
		if v, ok := outcomes.Load(idem.Claimed); ok {
			claimed = int(v.(*atomic.Int32).Load())
		}
		if claimed != 1 {
			t.Errorf("%d claimers of the expired key won, want 1", claimed)
		}
		if _, ok := outcomes.Load(idem.Mismatch); ok {
			t.Errorf("a concurrent claimer got Mismatch")
		}
		if got := e.effectCount(t, "k"); got != 3 {
			t.Errorf("%d effect rows, want 3: one per window", got)
		}
	})
}

func TestPurge(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		c := newClock()
		e := setup(t, tg, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
		ctx := context.Background()
		for i := 0; i < 25; i++ {
			k := fmt.Sprintf("old-%d", i)
			res, err := e.do(t, k, hashA, e.effect(k, created), true)
			wantOutcome(t, res, err, idem.Claimed)
		}
		c.Advance(time.Hour)
		for i := 0; i < 3; i++ {
			k := fmt.Sprintf("new-%d", i)
			res, err := e.do(t, k, hashA, e.effect(k, created), true)
			wantOutcome(t, res, err, idem.Claimed)
		}
		n, err := e.store.Purge(ctx, e.db, 10)
		if err != nil || n != 25 {
			t.Fatalf("Purge = %d, %v, want 25", n, err)
		}
		var left int
		if err := e.db.QueryRowContext(ctx, "SELECT count(*) FROM "+e.table).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 3 {
			t.Errorf("%d records left, want the 3 live ones", left)
		}
		if n, err := e.store.Purge(ctx, e.db, 10); err != nil || n != 0 {
			t.Errorf("second Purge = %d, %v, want 0", n, err)
		}
	})
}

func TestMigrateTwice(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		if err := e.store.Migrate(context.Background(), e.db); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		if len(e.store.Schema()) == 0 {
			t.Fatal("empty Schema")
		}
	})
}
