package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestForget shows what Forget refuses on database/sql besides what
// idemtest's Forget properties hold every driver to: a key too long to be
// one, a record left unfinished by a Func that committed, which is kept
// and still settled after, and a multi-step request inside a phase, whose
// transaction holds the record. The runner then finishes it as if nobody
// had tried, and its finished record is forgotten.
func TestForget(t *testing.T) {
	f := func(t *testing.T, tg target) {
		ctx := context.Background()
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		if err := e.Store.Forget(ctx, e.DB, strings.Repeat("k", idem.MaxStoredKeyBytes+1)); !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("Forget of a key too long: %v, want ErrInvalidKey", err)
		}

		if _, err := e.Store.DoTx(ctx, e.DB, nil, "stuck", dbtest.HashA, e.commitsItself("stuck")); !errors.Is(err, idem.ErrTxEnded) {
			t.Fatalf("DoTx = %v, want ErrTxEnded", err)
		}
		err := e.Store.Forget(ctx, e.DB, "stuck")
		if !errors.Is(err, idem.ErrKeyUnfinished) || errors.Is(err, idem.ErrKeyHeld) {
			t.Errorf("Forget of a key left unfinished: %v, want ErrKeyUnfinished", err)
		}
		res, err := e.Store.Lookup(ctx, e.DB, "stuck")
		dbtest.WantOutcome(t, res, err, idem.InFlight)
		if err := e.Store.Settle(ctx, e.DB, "stuck", dbtest.Created); err != nil {
			t.Fatalf("Settle after Forget refused: %v", err)
		}
		if err := e.Store.Forget(ctx, e.DB, "stuck"); err != nil {
			t.Errorf("Forget of the settled key: %v", err)
		}

		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			return // one writer at a time: Forget would wait at BEGIN for the phase
		}
		o := &order{e: e, key: "order-12"}
		inPhase, letGo := make(chan struct{}), make(chan struct{})
		steps := o.steps()
		steps[0] = idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
			close(inPhase)
			<-letGo
			return o.phase("order")(ctx, tx)
		})
		done := o.start(steps)
		<-inPhase
		if err := e.Store.Forget(ctx, e.DB, o.key); !errors.Is(err, idem.ErrKeyHeld) {
			t.Errorf("Forget of a request inside a phase: %v, want ErrKeyHeld", err)
		}
		close(letGo)
		r := <-done
		dbtest.WantOutcome(t, r.res, r.err, idem.Claimed)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if err := e.Store.Forget(ctx, e.DB, o.key); err != nil {
			t.Errorf("Forget of the finished request: %v", err)
		}
	}
	dbtest.ForEachRunTarget(t, f)
	dbtest.ForEachVitess(t, f)
}
