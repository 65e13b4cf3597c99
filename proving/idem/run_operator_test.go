package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestSettleLiveRun shows that an operator cannot settle or release a
// multi-step request whose runner is alive: neither while it is in a call,
// which holds no transaction, only its lease, nor inside a phase, whose
// transaction holds the record. The runner then finishes the request as if
// nobody had tried.
func TestSettleLiveRun(t *testing.T) {
	f := func(t *testing.T, tg target) {
		ctx := context.Background()
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		settled := idem.Response{Status: 500, Body: []byte("settled by an operator")}
		refused := func(what string) {
			t.Helper()
			if err := e.Store.Settle(ctx, e.DB, "order-10", settled); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("Settle %s: %v, want ErrKeyHeld", what, err)
			}
			if err := e.Store.ReleaseWithoutEffect(ctx, e.DB, "order-10"); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("ReleaseWithoutEffect %s: %v, want ErrKeyHeld", what, err)
			}
			if err := e.Store.ReleaseUndone(ctx, e.DB, "order-10"); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("ReleaseUndone %s: %v, want ErrKeyHeld", what, err)
			}
		}

		o := &order{e: e, key: "order-10"}
		h := holdRun(t, o)
		refused("in a call")
		res, err := h.finish()
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, orderResponse)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})

		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			return // one writer at a time: Settle would wait at BEGIN for the phase
		}
		o = &order{e: e, key: "order-11"}
		inPhase, letGo := make(chan struct{}), make(chan struct{})
		steps := o.steps()
		steps[0] = idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
			close(inPhase)
			<-letGo
			return o.phase("order")(ctx, tx)
		})
		done := o.start(steps)
		<-inPhase
		for _, op := range []func() error{
			func() error { return e.Store.Settle(ctx, e.DB, o.key, settled) },
			func() error { return e.Store.ReleaseWithoutEffect(ctx, e.DB, o.key) },
			func() error { return e.Store.ReleaseUndone(ctx, e.DB, o.key) },
		} {
			if err := op(); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("settling or releasing a request inside a phase: %v, want ErrKeyHeld", err)
			}
		}
		close(letGo)
		r := <-done
		dbtest.WantOutcome(t, r.res, r.err, idem.Claimed)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
	}
	dbtest.ForEachRunTarget(t, f)
	dbtest.ForEachVitess(t, f)
}

// TestReleaseCommittedPhases shows that a multi-step request whose runner
// is gone, but one of whose phases committed, has effects: the plain
// release refuses it, and only ReleaseUndone, which says that those effects
// were undone, deletes it. A request that committed no phase yet is
// released as a plain record is.
func TestReleaseCommittedPhases(t *testing.T) {
	f := func(t *testing.T, tg target) {
		ctx := context.Background()
		e := setup(t, tg)
		down := errors.New("provider unreachable")

		o := &order{e: e, key: "order-12", charge: func(context.Context, string) error { return down }}
		if _, err := o.run(t, dbtest.HashA); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}
		if err := e.Store.ReleaseWithoutEffect(ctx, e.DB, o.key); !errors.Is(err, idem.ErrPhasesCommitted) {
			t.Fatalf("ReleaseWithoutEffect past a committed phase: %v, want ErrPhasesCommitted", err)
		}
		if u, err := e.Store.Unfinished(ctx, e.DB, 0, 10); err != nil || len(u) != 1 || u[0].Phase != "order" {
			t.Fatalf("Unfinished after the refusal: %+v, %v; want the request still at its phase", u, err)
		}
		if err := e.Store.ReleaseUndone(ctx, e.DB, o.key); err != nil {
			t.Fatalf("ReleaseUndone: %v", err)
		}
		if _, err := e.Store.Lookup(ctx, e.DB, o.key); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup after ReleaseUndone: %v, want ErrNotFound", err)
		}
		o.charge = nil
		res, err := o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		// The operator said the first phase's effect was undone; the test
		// did not undo it, so it shows twice.
		o.wantPhases(t, map[string]int{"order": 2, "charged": 1, "confirm": 1})

		// A call before any phase: nothing committed but the record.
		early := &order{e: e, key: "order-13"}
		calls := 0
		steps := []idem.Step{
			idem.Call("charge", func(context.Context, string) error { calls++; return down }),
			idem.Final("confirm", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
				return orderResponse, early.phase("confirm")(ctx, tx)
			}),
		}
		if _, err := e.Store.Run(ctx, e.DB, nil, early.key, dbtest.HashA, steps...); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}
		if err := e.Store.ReleaseWithoutEffect(ctx, e.DB, early.key); err != nil {
			t.Fatalf("ReleaseWithoutEffect before any phase: %v", err)
		}
		if _, err := e.Store.Lookup(ctx, e.DB, early.key); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup after the release: %v, want ErrNotFound", err)
		}
	}
	dbtest.ForEachRunTarget(t, f)
	dbtest.ForEachVitess(t, f)
}

// TestSettleRunRetention settles a multi-step request that its runner
// left: its retention window starts then, Lookup shows the expiry, the key
// replays the operator's response until it runs out, and Purge deletes it
// after.
func TestSettleRunRetention(t *testing.T) {
	f := func(t *testing.T, tg target) {
		ctx := context.Background()
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now), idem.WithRetention(time.Hour))
		o := &order{e: e, key: "order-14", charge: func(context.Context, string) error { return errors.New("provider unreachable") }}
		if _, err := o.run(t, dbtest.HashA); err == nil {
			t.Fatal("Run succeeded, want the provider's error")
		}
		c.Advance(3 * time.Hour)
		settled := idem.Response{Status: 502, Body: []byte("payment provider down; refunded")}
		if err := e.Store.Settle(ctx, e.DB, o.key, settled); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		res, err := e.Store.Lookup(ctx, e.DB, o.key)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, settled)
		if want := c.Now().Add(time.Hour); res.ExpiresAt.Before(want.Add(-time.Minute)) || res.ExpiresAt.After(want) {
			t.Errorf("expires at %v, want the retention from the settling, %v", res.ExpiresAt, want)
		}
		res, err = o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, settled)
		if u, err := e.Store.Unfinished(ctx, e.DB, 0, 10); err != nil || len(u) != 0 {
			t.Errorf("Unfinished after the settling: %+v, %v; want none", u, err)
		}

		c.Advance(30 * time.Minute)
		if n, err := e.Store.Purge(ctx, e.DB, 100); err != nil || n != 0 {
			t.Fatalf("Purge within the retention: %d, %v; want nothing purged", n, err)
		}
		c.Advance(31 * time.Minute)
		if _, err := e.Store.Lookup(ctx, e.DB, o.key); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup past the retention: %v, want ErrNotFound", err)
		}
		if n, err := e.Store.Purge(ctx, e.DB, 100); err != nil || n != 1 {
			t.Fatalf("Purge past the retention: %d, %v; want the settled request purged", n, err)
		}
	}
	dbtest.ForEachRunTarget(t, f)
	dbtest.ForEachVitess(t, f)
}
