package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// The properties of Forget, through the suite's Driver: a finished record
// is deleted so that its key runs anew, and a record whose request is
// running, or unfinished, is kept.

// testForget forgets a finished record: Lookup no longer finds it, and the
// next request with the key runs as a new one, even with another request
// hash, and is replayed after. A key with no record is ErrNotFound, and
// Forget leaves no record behind for it.
func testForget(t *testing.T, s *suite) {
	ctx := context.Background()
	e := s.env(t)
	if err := e.drv.Forget(ctx, e.store, "never"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Forget of a key with no record: %v, want ErrNotFound", err)
	}
	if recs := e.rawRecords(t); len(recs) != 0 {
		t.Errorf("Forget of a key with no record left %d records, want none", len(recs))
	}

	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	if err := e.drv.Forget(ctx, e.store, "k"); err != nil {
		t.Fatalf("Forget of a finished record: %v", err)
	}
	if _, err := e.store.Lookup(ctx, e.db, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup after Forget: %v, want ErrNotFound", err)
	}
	if err := e.drv.Forget(ctx, e.store, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Forget of a forgotten key: %v, want ErrNotFound", err)
	}
	// The key is free: a request with another body runs, where before
	// Forget it would have been a mismatch.
	again := idem.Response{Status: 202, Body: []byte("the second request")}
	res, err = e.do(t, "k", hashB, e.effect("k", again), true)
	wantOutcome(t, res, err, idem.Claimed)
	res, err = e.do(t, "k", hashB, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, again)
	e.wantEffects(t, "k", 2)
}

// testForgetRunning shows that Forget never deletes a record whose request
// is running, and never an unfinished one: a claim that another
// transaction holds, for a new key or one that takes an expired record
// over, which Forget's own clock still sees as finished and live, is
// ErrKeyHeld, and the holder's record is intact after; a multi-step
// request whose runner holds its lease in a call, with no transaction
// open, is ErrKeyHeld too, and one whose runner gave up is
// ErrKeyUnfinished. Each is forgotten once it has finished.
func testForgetRunning(t *testing.T, s *suite) {
	ctx := context.Background()
	c := newClock()
	e := s.env(t, idem.WithClock(c.Now), idem.WithLockTimeout(100*time.Millisecond))
	forgetHeld := func(key, what string) {
		t.Helper()
		if err := e.drv.Forget(ctx, e.store, key); !errors.Is(err, idem.ErrKeyHeld) {
			t.Errorf("Forget of %s: %v, want ErrKeyHeld", what, err)
		}
	}

	t.Run("Transaction", func(t *testing.T) {
		skipIfConflictAtCommit(t, s)
		if s.caps.OneWriter {
			t.Skip("the database lets one transaction write at a time: Forget waits at BEGIN for the holder, and never meets its claim")
		}
		holder := e.hold(t, "held")
		forgetHeld("held", "a key that a transaction holds")
		if err := holder.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := e.store.Lookup(ctx, e.db, "held")
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, created)

		// A record that has expired for a later request, which takes it
		// over in a transaction it keeps open, while Forget's Store, a
		// day behind, sees the old record finished and live.
		res, err = e.do(t, "old", hashA, e.effect("old", created), true)
		wantOutcome(t, res, err, idem.Claimed)
		later, err := idem.New(s.d, idem.WithTable(e.table), idem.WithLockTimeout(100*time.Millisecond),
			idem.WithClock(func() time.Time { return c.Now().Add(48 * time.Hour) }))
		if err != nil {
			t.Fatal(err)
		}
		tx := e.begin(t, nil)
		res, err = e.drv.Do(ctx, later, tx, "old", hashB, e.effect("old", created))
		wantOutcome(t, res, err, idem.Claimed)
		forgetHeld("old", "an expired record that a transaction is taking over")
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		res, err = e.store.Lookup(ctx, e.db, "old")
		wantOutcome(t, res, err, idem.Replay)
		e.wantEffects(t, "old", 1)
		if err := e.drv.Forget(ctx, e.store, "old"); err != nil {
			t.Errorf("Forget once the takeover rolled back: %v", err)
		}
	})

	t.Run("MultiStep", func(t *testing.T) {
		skipWithoutRun(t, s)
		h := hold(t, e, "run")
		forgetHeld("run", "a multi-step request whose runner holds its lease in a call")
		if err := h.finish(); err != nil {
			t.Fatalf("the runner after Forget was refused: %v", err)
		}
		h.ran(t, 1, 1, 1)
		if err := e.drv.Forget(ctx, e.store, "run"); err != nil {
			t.Fatalf("Forget of a finished multi-step request: %v", err)
		}
		again := &request{e: e, key: "run"}
		res, err := again.run(e.store, hashB)
		wantOutcome(t, res, err, idem.Claimed)
		again.ran(t, 1, 1, 1)

		down := errors.New("the provider is down")
		gone := &request{e: e, key: "given-up", call: func(context.Context, string) error { return down }}
		if _, err := gone.run(e.store, hashA); !errors.Is(err, down) {
			t.Fatalf("Run with a failing call: %v, want its error", err)
		}
		if err := e.drv.Forget(ctx, e.store, "given-up"); !errors.Is(err, idem.ErrKeyUnfinished) {
			t.Errorf("Forget of a multi-step request that its runner gave up: %v, want ErrKeyUnfinished", err)
		}
		res, err = e.do(t, "given-up", hashA, mustNotRun(t), false)
		wantOutcome(t, res, err, idem.InFlight)
	})
}
