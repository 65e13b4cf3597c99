package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// commitsItself is a Func that makes the mistake of committing tx itself,
// after writing its effect.
func (e *env) commitsItself(key string) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if _, err := e.effect(key, created)(ctx, tx); err != nil {
			return idem.Response{}, err
		}
		return created, tx.Commit()
	}
}

// TestFuncEndsTransaction shows what Do answers when fn commits or rolls
// back the transaction itself: an error that names the cause, never Claimed.
func TestFuncEndsTransaction(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		ctx := context.Background()

		_, err := e.store.DoTx(ctx, e.db, nil, "commits", hashA, e.commitsItself("commits"))
		if !errors.Is(err, idem.ErrTxEnded) || !errors.Is(err, sql.ErrTxDone) {
			t.Fatalf("DoTx with a Func that commits = %v, want ErrTxEnded", err)
		}
		// The commit kept the effect and an unfinished record: the key
		// is stuck until an operator settles it (TestSettle).
		if n := e.effectCount(t, "commits"); n != 1 {
			t.Errorf("%d effect rows, want the 1 that fn committed", n)
		}
		res, err := e.store.Lookup(ctx, e.db, "commits")
		wantOutcome(t, res, err, idem.InFlight)

		rollsBack := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			if _, err := e.effect("rolls back", created)(ctx, tx); err != nil {
				return idem.Response{}, err
			}
			return created, tx.Rollback()
		}
		if _, err := e.store.DoTx(ctx, e.db, nil, "rolls back", hashA, rollsBack); !errors.Is(err, idem.ErrTxEnded) {
			t.Fatalf("DoTx with a Func that rolls back = %v, want ErrTxEnded", err)
		}
		res, err = e.store.DoTx(ctx, e.db, nil, "rolls back", hashA, e.effect("rolls back", created))
		wantOutcome(t, res, err, idem.Claimed)
	})
}

// TestSettle settles and releases keys left unfinished by a Func that
// committed, and shows what both refuse.
func TestSettle(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		ctx := context.Background()
		stuck := func(key string) {
			t.Helper()
			if _, err := e.store.DoTx(ctx, e.db, nil, key, hashA, e.commitsItself(key)); !errors.Is(err, idem.ErrTxEnded) {
				t.Fatalf("DoTx = %v, want ErrTxEnded", err)
			}
		}

		stuck("settled")
		settled := idem.Response{Status: 201, Header: created.Header, Body: []byte(`{"order":1,"settled":true}`)}
		if err := e.store.Settle(ctx, e.db, "settled", settled); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		res, err := e.store.DoTx(ctx, e.db, nil, "settled", hashA, mustNotRun(t))
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, settled)
		res, err = e.store.DoTx(ctx, e.db, nil, "settled", hashB, mustNotRun(t))
		wantOutcome(t, res, err, idem.Mismatch)
		if err := e.store.Settle(ctx, e.db, "settled", settled); !errors.Is(err, idem.ErrKeyFinished) {
			t.Errorf("Settle of a finished key = %v, want ErrKeyFinished", err)
		}
		if err := e.store.ReleaseWithoutEffect(ctx, e.db, "settled"); !errors.Is(err, idem.ErrKeyFinished) {
			t.Errorf("ReleaseWithoutEffect of a finished key = %v, want ErrKeyFinished", err)
		}

		stuck("released")
		if err := e.store.ReleaseWithoutEffect(ctx, e.db, "released"); err != nil {
			t.Fatalf("ReleaseWithoutEffect: %v", err)
		}
		if _, err := e.store.Lookup(ctx, e.db, "released"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup after the release = %v, want ErrNotFound", err)
		}
		res, err = e.store.DoTx(ctx, e.db, nil, "released", hashA, e.effect("released", created))
		wantOutcome(t, res, err, idem.Claimed)

		if err := e.store.Settle(ctx, e.db, "never", settled); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Settle of a missing key = %v, want ErrNotFound", err)
		}
		if _, err := e.store.Lookup(ctx, e.db, "never"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Settle of a missing key left a record: %v", err)
		}

		if tg.dialect.Name() == "sqlite" {
			return // one writer at a time: Settle would wait at BEGIN for the holder
		}
		tx := e.begin(t, nil)
		res, err = e.store.Do(ctx, tx, "held", hashA, e.effect("held", created))
		wantOutcome(t, res, err, idem.Claimed)
		for _, op := range []func() error{
			func() error { return e.store.Settle(ctx, e.db, "held", settled) },
			func() error { return e.store.ReleaseWithoutEffect(ctx, e.db, "held") },
		} {
			if err := op(); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("settling a key that a live transaction holds = %v, want ErrKeyHeld", err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		res, err = e.store.Lookup(ctx, e.db, "held")
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, created)
	})
}
