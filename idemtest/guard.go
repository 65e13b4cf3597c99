package idemtest

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgo/idem"
)

// testGuarded ends the claiming transaction on the server, behind the
// driver's back (database/sql's, pgx's), as MySQL does to a deadlock victim
// and SQLite to an interrupted statement: tx then runs each statement in
// autocommit. A
// duplicate request claims the key and commits meanwhile. What Do sends after
// fn (Complete when fn answers, Abandon when it fails) must leave the
// duplicate's record alone, which only a statement guarded by the claim's
// token does: an unguarded Complete overwrites the record with a response
// whose effect was rolled back, and an unguarded Abandon deletes it, so that
// the client's next retry runs the effect a second time.
func testGuarded(t *testing.T, s *suite) {
	for _, fnFails := range []bool{false, true} {
		name := "Complete"
		if fnFails {
			name = "Abandon"
		}
		t.Run(name, func(t *testing.T) {
			e := s.env(t)
			ctx := context.Background()
			rolledBack := idem.Response{Status: 201, Body: []byte(`{"effect":"rolled back"}`)}
			failed := errors.New("fn failed after its transaction ended")
			tx := e.begin(t, nil)
			_, err := e.drv.Do(ctx, e.store, tx, "k", hashA, func(ctx context.Context, tx Tx) (idem.Response, error) {
				if _, err := e.effect("k", rolledBack)(ctx, tx); err != nil {
					return idem.Response{}, err
				}
				if _, err := tx.Exec(ctx, "ROLLBACK"); err != nil {
					t.Fatalf("ending the transaction on the server: %v", err)
				}
				dup, err := e.do(t, "k", hashA, e.effect("k", created), true)
				wantOutcome(t, dup, err, idem.Claimed)
				if fnFails {
					return idem.Response{}, failed
				}
				return rolledBack, nil
			})
			switch {
			case fnFails && !errors.Is(err, failed):
				t.Errorf("Do = %v, want fn's error", err)
			case !fnFails && !errors.Is(err, idem.ErrRetry):
				t.Errorf("Do = %v, want an error that matches ErrRetry: the claim is gone", err)
			}
			looked, err := e.store.Lookup(ctx, e.db, "k")
			if err != nil {
				t.Fatalf("Lookup after the duplicate committed: %v; want its record (an unguarded Abandon deletes it)", err)
			}
			wantOutcome(t, looked, nil, idem.Replay)
			sameResponse(t, looked.Response, created) // an unguarded Complete overwrites it
			e.wantEffects(t, "k", 1)
		})
	}
}
