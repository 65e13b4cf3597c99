package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// testStats counts a table with the dialect's Stats and CountExpired
// statements (Store.Stats, Store.CountExpired): an empty table has no
// record and no oldest; then live and expired records, finished and left
// unfinished by a Func that committed its transaction, count as such (an
// expired record is in flight no more), with the time of the oldest claim,
// and CountExpired counts the expired ones. A dialect without either
// statement skips, saying so.
func testStats(t *testing.T, s *suite) {
	c := newClock()
	e := s.env(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
	ctx := context.Background()
	_, statsErr := e.store.Stats(ctx, e.db)
	_, countErr := e.store.CountExpired(ctx, e.db)
	if errors.Is(statsErr, errors.ErrUnsupported) && errors.Is(countErr, errors.ErrUnsupported) {
		t.Skip("the dialect has neither a Stats nor a CountExpired statement: the Store cannot count its table")
	}
	counts := func(live, inFlight, expired int64, oldest time.Time) {
		t.Helper()
		st, err := e.store.Stats(ctx, e.db)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
		case err != nil:
			t.Fatalf("Stats: %v", err)
		case st.Live != live || st.InFlight != inFlight || st.Expired != expired || !st.Oldest.Equal(oldest):
			t.Errorf("Stats counts %d live, %d in flight, %d expired, the oldest claimed at %v; want %d, %d, %d, %v",
				st.Live, st.InFlight, st.Expired, st.Oldest, live, inFlight, expired, oldest)
		}
		n, err := e.store.CountExpired(ctx, e.db)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
		case err != nil:
			t.Fatalf("CountExpired: %v", err)
		case n != expired:
			t.Errorf("CountExpired = %d, want %d", n, expired)
		}
	}
	counts(0, 0, 0, time.Time{})

	// unfinished claims key with a Func that commits its transaction: the
	// record stays, without a response.
	unfinished := func(key string) {
		t.Helper()
		tx := e.begin(t, nil)
		_, err := e.drv.Do(ctx, e.store, tx, key, hashA, func(ctx context.Context, tx Tx) (idem.Response, error) {
			return created, tx.Commit(ctx)
		})
		if !errors.Is(err, idem.ErrTxEnded) {
			t.Fatalf("Do with a Func that commits its transaction: %v, want ErrTxEnded", err)
		}
		_ = tx.Rollback(ctx) // ended already
	}
	first := c.Now()
	res, err := e.do(t, "old-finished", hashA, e.effect("old-finished", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	c.Advance(time.Minute)
	unfinished("old-unfinished")
	c.Advance(time.Hour)
	for _, key := range []string{"new-1", "new-2"} {
		res, err := e.do(t, key, hashA, e.effect(key, created), true)
		wantOutcome(t, res, err, idem.Claimed)
	}
	unfinished("new-unfinished")
	counts(3, 1, 2, first)
}
