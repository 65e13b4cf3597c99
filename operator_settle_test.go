package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

// commitsItself is a Func that makes the mistake of committing tx itself,
// after writing its effect.
func (e *env) commitsItself(key string) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if _, err := e.Effect(key, created)(ctx, tx); err != nil {
			return idem.Response{}, err
		}
		return created, tx.Commit()
	}
}

// TestFuncEndsTransaction shows what Do answers when fn commits or rolls
// back the transaction itself: an error that names the cause, never Claimed.
func TestFuncEndsTransaction(t *testing.T) {
	f := func(t *testing.T, tg target) {
		e := setup(t, tg)
		ctx := context.Background()

		_, err := e.Store.DoTx(ctx, e.DB, nil, "commits", hashA, e.commitsItself("commits"))
		if !errors.Is(err, idem.ErrTxEnded) || !errors.Is(err, sql.ErrTxDone) {
			t.Fatalf("DoTx with a Func that commits = %v, want ErrTxEnded", err)
		}
		// The commit kept the effect and an unfinished record: the key
		// is stuck until an operator settles it (TestSettle).
		if n := e.EffectCount(t, "commits"); n != 1 {
			t.Errorf("%d effect rows, want the 1 that fn committed", n)
		}
		res, err := e.Store.Lookup(ctx, e.DB, "commits")
		wantOutcome(t, res, err, idem.InFlight)

		rollsBack := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			if _, err := e.Effect("rolls back", created)(ctx, tx); err != nil {
				return idem.Response{}, err
			}
			return created, tx.Rollback()
		}
		if _, err := e.Store.DoTx(ctx, e.DB, nil, "rolls back", hashA, rollsBack); !errors.Is(err, idem.ErrTxEnded) {
			t.Fatalf("DoTx with a Func that rolls back = %v, want ErrTxEnded", err)
		}
		res, err = e.Store.DoTx(ctx, e.DB, nil, "rolls back", hashA, e.Effect("rolls back", created))
		wantOutcome(t, res, err, idem.Claimed)
	}
	forEach(t, f)
	forEachVitess(t, f)
}

// TestSettle settles and releases keys left unfinished by a Func that
// committed, and shows what both refuse.
func TestSettle(t *testing.T) {
	f := func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		ctx := context.Background()
		stuck := func(key string) {
			t.Helper()
			if _, err := e.Store.DoTx(ctx, e.DB, nil, key, hashA, e.commitsItself(key)); !errors.Is(err, idem.ErrTxEnded) {
				t.Fatalf("DoTx = %v, want ErrTxEnded", err)
			}
		}

		stuck("settled")
		settled := idem.Response{Status: 201, Header: created.Header, Body: []byte(`{"order":1,"settled":true}`)}
		if err := e.Store.Settle(ctx, e.DB, "settled", settled); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		res, err := e.Store.DoTx(ctx, e.DB, nil, "settled", hashA, mustNotRun(t))
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, settled)
		res, err = e.Store.DoTx(ctx, e.DB, nil, "settled", hashB, mustNotRun(t))
		wantOutcome(t, res, err, idem.Mismatch)
		if err := e.Store.Settle(ctx, e.DB, "settled", settled); !errors.Is(err, idem.ErrKeyFinished) {
			t.Errorf("Settle of a finished key = %v, want ErrKeyFinished", err)
		}
		if err := e.Store.ReleaseWithoutEffect(ctx, e.DB, "settled"); !errors.Is(err, idem.ErrKeyFinished) {
			t.Errorf("ReleaseWithoutEffect of a finished key = %v, want ErrKeyFinished", err)
		}

		stuck("released")
		if err := e.Store.ReleaseWithoutEffect(ctx, e.DB, "released"); err != nil {
			t.Fatalf("ReleaseWithoutEffect: %v", err)
		}
		if _, err := e.Store.Lookup(ctx, e.DB, "released"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup after the release = %v, want ErrNotFound", err)
		}
		res, err = e.Store.DoTx(ctx, e.DB, nil, "released", hashA, e.Effect("released", created))
		wantOutcome(t, res, err, idem.Claimed)

		if err := e.Store.Settle(ctx, e.DB, "never", settled); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Settle of a missing key = %v, want ErrNotFound", err)
		}
		if _, err := e.Store.Lookup(ctx, e.DB, "never"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Settle of a missing key left a record: %v", err)
		}

		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			return // one writer at a time: Settle would wait at BEGIN for the holder
		}
		tx := e.Begin(t, nil)
		res, err = e.Store.Do(ctx, tx, "held", hashA, e.Effect("held", created))
		wantOutcome(t, res, err, idem.Claimed)
		for _, op := range []func() error{
			func() error { return e.Store.Settle(ctx, e.DB, "held", settled) },
			func() error { return e.Store.ReleaseWithoutEffect(ctx, e.DB, "held") },
		} {
			if err := op(); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("settling a key that a live transaction holds = %v, want ErrKeyHeld", err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		res, err = e.Store.Lookup(ctx, e.DB, "held")
		wantOutcome(t, res, err, idem.Replay)
		sameResponse(t, res.Response, created)
	}
	forEach(t, f)
	forEachVitess(t, f)
}
