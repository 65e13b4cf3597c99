package idempgx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
)

// TestOperatorsOnPgx runs the operators' actions through a pgx pool: a
// multi-step request left unfinished after its first phase is refused by
// ReleaseWithoutEffect (its phase committed), settled with a response that
// retries then replay, and another is deleted by ReleaseUndone; Stats and
// CountExpired count the expired records and the live one, Purge deletes
// the expired records and leaves the live one, and Forget the settled one,
// after which its key runs anew.
func TestOperatorsOnPgx(t *testing.T) {
	ctx := context.Background()
	e := setup(t, 4)
	pg := idempgx.New(e.Store)
	down := errors.New("the provider is down")
	unfinished := func(key string) {
		t.Helper()
		_, err := pg.Run(ctx, e.pool, pgx.TxOptions{}, key, hashA,
			idem.Phase("reserve", func(ctx context.Context, tx pgx.Tx) error {
				_, err := e.effect(key, created)(ctx, tx)
				return err
			}),
			idem.Call("charge", func(context.Context, string) error { return down }),
			idem.Final("confirm", e.effect(key, created)))
		if !errors.Is(err, down) {
			t.Fatalf("Run of %s: %v, want the call's error", key, err)
		}
	}

	unfinished("settled")
	if err := pg.ReleaseWithoutEffect(ctx, e.pool, "settled"); !errors.Is(err, idem.ErrPhasesCommitted) {
		t.Errorf("ReleaseWithoutEffect past a committed phase: %v, want ErrPhasesCommitted", err)
	}
	if err := pg.Settle(ctx, e.pool, "settled", created); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if err := pg.Settle(ctx, e.pool, "settled", created); !errors.Is(err, idem.ErrKeyFinished) {
		t.Errorf("Settle again: %v, want ErrKeyFinished", err)
	}
	res, err := pg.Lookup(ctx, e.pool, "settled")
	if err != nil || res.Outcome != idem.Replay || res.Response.Status != created.Status {
		t.Errorf("Lookup after Settle: %v %v, %v; want a replay of the settled response", res.Outcome, res.Response.Status, err)
	}

	unfinished("released")
	if err := pg.ReleaseUndone(ctx, e.pool, "released"); err != nil {
		t.Fatalf("ReleaseUndone: %v", err)
	}
	if _, err := pg.Lookup(ctx, e.pool, "released"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup after ReleaseUndone: %v, want ErrNotFound", err)
	}
	if list, err := pg.Unfinished(ctx, e.pool, 0, 10); err != nil || len(list) != 0 {
		t.Errorf("Unfinished at the end: %+v, %v; want none", list, err)
	}

	// Records made two days ago have expired; the settled one is live.
	past, err := idem.New(idem.Postgres(), idem.WithTable(e.Table), idem.WithClock(func() time.Time { return time.Now().Add(-48 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"old-1", "old-2", "old-3"} {
		if res, err := idempgx.New(past).DoTx(ctx, e.pool, pgx.TxOptions{}, key, hashA, e.effect(key, created)); err != nil || res.Outcome != idem.Claimed {
			t.Fatalf("DoTx of %s: %v, %v", key, res.Outcome, err)
		}
	}
	counts := func(when string, live, expired int64) {
		t.Helper()
		st, err := pg.Stats(ctx, e.pool)
		if err != nil || st.Live != live || st.InFlight != 0 || st.Expired != expired || st.Oldest.IsZero() {
			t.Errorf("Stats %s = %+v, %v; want %d live, none in flight, %d expired, and the oldest", when, st, err, live, expired)
		}
		if n, err := pg.CountExpired(ctx, e.pool); err != nil || n != expired {
			t.Errorf("CountExpired %s = %d, %v; want %d", when, n, err, expired)
		}
	}
	counts("before Purge", 1, 3)
	if _, err := pg.Stats(ctx, nil); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Stats with a nil pool: %v, want ErrInvalidArgument", err)
	}
	if _, err := pg.CountExpired(ctx, nil); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("CountExpired with a nil pool: %v, want ErrInvalidArgument", err)
	}
	n, err := pg.Purge(ctx, e.pool, 2)
	if err != nil || n != 3 {
		t.Errorf("Purge: %d, %v; want the 3 expired records", n, err)
	}
	counts("after Purge", 1, 0)
	if _, err := pg.Lookup(ctx, e.pool, "settled"); err != nil {
		t.Errorf("Lookup of the live record after Purge: %v", err)
	}
	if err := pg.Forget(ctx, nil, "settled"); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Forget with a nil pool: %v, want ErrInvalidArgument", err)
	}
	if err := pg.Forget(ctx, e.pool, "settled"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if res, err := pg.DoTx(ctx, e.pool, pgx.TxOptions{}, "settled", hashA, e.effect("settled", created)); err != nil || res.Outcome != idem.Claimed {
		t.Errorf("DoTx after Forget: %v, %v; want the key claimed anew", res.Outcome, err)
	}
}
