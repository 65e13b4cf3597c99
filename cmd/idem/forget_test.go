package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// TestForget runs idem forget to each of its exit statuses but 1 and 2,
// which TestBadInput shows: a finished key is forgotten (0) and its next
// request runs as a new one; a key with no live record is 3; a key that a
// live transaction or a multi-step request's live lease holds is 6, and
// the record is kept; a key left unfinished that no one holds is 8, and is
// kept to be settled or released.
func TestForget(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		store := tb.store(t, idem.WithClock(func() time.Time { return t0 }), idem.WithLease(time.Hour))
		fx := newEffects(t, tb)
		e := testEnv(t0.Add(3 * time.Minute))
		forget := func(t *testing.T, more ...string) result {
			t.Helper()
			return runWith(t, e, append([]string{"forget"}, tb.args(more...)...)...)
		}
		lookup := func(t *testing.T, key string, want idem.Outcome) {
			t.Helper()
			res, err := store.Lookup(context.Background(), tb.db, key)
			if err != nil || res.Outcome != want {
				t.Errorf("Lookup of %s = %v, %v; want %v", key, res.Outcome, err, want)
			}
		}

		t.Run("Finished", func(t *testing.T) {
			tb.put(t, store, "order-1", idem.Response{Status: 201})
			r := forget(t, "-key", "order-1")
			r.wantCode(t, exitOK)
			equalLines(t, r.stdout,
				`key      "order-1"`,
				`state    forgotten: the record is deleted; the next request with this key runs as a new one`)
			if _, err := store.Lookup(context.Background(), tb.db, "order-1"); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Lookup after forget = %v, want ErrNotFound", err)
			}
			if res := fx.retry(t, store, "order-1"); res.Outcome != idem.Claimed {
				t.Errorf("the next request after forget: %v, want claimed", res.Outcome)
			}
			if n := fx.Count(t, "order-1"); n != 1 {
				t.Errorf("%d effects of order-1, want the 1 of the new request", n)
			}
		})

		t.Run("NotFound", func(t *testing.T) {
			wantError(t, forget(t, "-key", "never-sent"), exitNotFound,
				`idem: no live record for key "never-sent": it was never committed, it expired, or it was purged; nothing to forget (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
		})

		t.Run("Scoped", func(t *testing.T) {
			stored := idemhttp.StoredKey("acct_42", "order-9")
			tb.put(t, store, stored, idem.Response{Status: 201})
			wantError(t, forget(t, "-key", "order-9"), exitNotFound,
				`idem: no live record for key "order-9": it was never committed, it expired, or it was purged; nothing to forget (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
			lookup(t, stored, idem.Replay)
			r := forget(t, "-scope", "acct_42", "-key", "order-9")
			r.wantCode(t, exitOK)
			if !strings.HasPrefix(r.stdout, `key      "`+stored+`"`+"\n") {
				t.Errorf("forget -scope shows:\n%s", r.stdout)
			}
			if res := fx.retry(t, store, stored); res.Outcome != idem.Claimed {
				t.Errorf("the next request after forget: %v, want claimed", res.Outcome)
			}
		})

		t.Run("Unfinished", func(t *testing.T) {
			fx.stuck(t, store, "order-2", true)
			wantError(t, forget(t, "-key", "order-2"), exitUnfinished,
				`idem: key "order-2" has not finished, and no live request holds it: nothing forgotten; find out what its request did, then settle it (idem settle -h) or release it (idem release -h)`)
			lookup(t, "order-2", idem.InFlight)
		})

		t.Run("Held", func(t *testing.T) {
			done := hold(t, tb, store, "order-3")
			r := runWith(t, e, append([]string{"forget"}, heldArgs(tb, "-key", "order-3")...)...)
			wantHeld(t, tb, r, "order-3")
			done()
		})

		t.Run("HeldByLease", func(t *testing.T) {
			ctx := context.Background()
			held, letGo, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				done <- runOrder(ctx, store, tb.db, "order-4", func(context.Context, string) error { close(held); <-letGo; return nil })
			}()
			<-held
			r := forget(t, "-key", "order-4")
			close(letGo)
			if err := <-done; err != nil {
				t.Fatalf("the runner after forget was refused: %v", err)
			}
			r.wantCode(t, exitHeld)
			if !strings.HasPrefix(r.stderr, `idem: a live request holds key "order-4": it is still running`) ||
				!strings.Contains(r.stderr, "the lease of its multi-step request runs until") || r.stdout != "" {
				t.Errorf("stdout %q, stderr %q; want it to say that the lease is live", r.stdout, r.stderr)
			}
			lookup(t, "order-4", idem.Replay)
		})
	})
}
