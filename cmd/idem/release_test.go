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

func TestRelease(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		store := tb.store(t, idem.WithClock(func() time.Time { return t0 }))
		fx := newEffects(t, tb)
		e := testEnv(t0.Add(3 * time.Minute))
		release := func(t *testing.T, more ...string) result {
			t.Helper()
			return runWith(t, e, append([]string{"release"}, tb.args(more...)...)...)
		}
		inFlight := func(t *testing.T, key string) {
			t.Helper()
			res, err := store.Lookup(context.Background(), tb.db, key)
			if err != nil || res.Outcome != idem.InFlight {
				t.Errorf("Lookup of %s = %v, %v; want it still in flight", key, res.Outcome, err)
			}
		}

		t.Run("Stuck", func(t *testing.T) {
			// The handler committed before it wrote its effect.
			fx.stuck(t, store, "order-1", false)

			// Without -no-effect, release refuses and changes nothing.
			r := release(t, "-key", "order-1")
			r.wantCode(t, exitUsage)
			if !strings.HasPrefix(r.stderr, "idem: release needs -no-effect: ") || !strings.Contains(r.stderr, "settle the key instead") ||
				strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Errorf("release without -no-effect: stdout %q, stderr %q", r.stdout, r.stderr)
			}
			inFlight(t, "order-1")

			r = release(t, "-key", "order-1", "-no-effect")
			r.wantCode(t, exitOK)
			equalLines(t, r.stdout,
				`key      "order-1"`,
				`state    released: the record is deleted; the next request with this key runs as a new one`)
			if _, err := store.Lookup(context.Background(), tb.db, "order-1"); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Lookup after release = %v, want ErrNotFound", err)
			}
			if res := fx.retry(t, store, "order-1"); res.Outcome != idem.Claimed {
				t.Errorf("retry after release: %v, want claimed", res.Outcome)
			}
			if n := fx.Count(t, "order-1"); n != 1 {
				t.Errorf("%d effects of order-1, want the 1 of the retry", n)
			}
		})

		t.Run("NotFound", func(t *testing.T) {
			wantError(t, release(t, "-key", "never-sent", "-no-effect"), exitNotFound,
				`idem: no live record for key "never-sent": it was never committed, it expired, or it was purged; nothing to release (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
		})

		t.Run("Finished", func(t *testing.T) {
			tb.put(t, store, "order-2", idem.Response{Status: 201})
			wantError(t, release(t, "-key", "order-2", "-no-effect"), exitFinished,
				`idem: key "order-2" has finished: retries get its stored response (idem inspect shows it), and there is nothing to release`)
			if res := fx.retry(t, store, "order-2"); res.Outcome != idem.Replay {
				t.Errorf("retry after the refusal: %v, want replay", res.Outcome)
			}
		})

		t.Run("Scoped", func(t *testing.T) {
			stored := idemhttp.StoredKey("acct_42", "order-9")
			fx.stuck(t, store, stored, false)
			wantError(t, release(t, "-key", "order-9", "-no-effect"), exitNotFound,
				`idem: no live record for key "order-9": it was never committed, it expired, or it was purged; nothing to release (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
			inFlight(t, stored)
			r := release(t, "-scope", "acct_42", "-key", "order-9", "-no-effect")
			r.wantCode(t, exitOK)
			if !strings.HasPrefix(r.stdout, `key      "`+stored+`"`+"\n") {
				t.Errorf("release -scope shows:\n%s", r.stdout)
			}
			if res := fx.retry(t, store, stored); res.Outcome != idem.Claimed {
				t.Errorf("retry after release: %v, want claimed", res.Outcome)
			}
		})

		t.Run("Held", func(t *testing.T) {
			done := hold(t, tb, store, "order-3")
			r := runWith(t, e, append([]string{"release"}, heldArgs(tb, "-key", "order-3", "-no-effect")...)...)
			wantHeld(t, tb, r, "order-3")
			done()
		})
	})
}
