package idem_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestConcurrentReplays sends many retries of finished requests at once,
// several of each key and of keys side by side: each must replay, and none
// may meet a deadlock. On the MySQL family a claim that found a record
// holds the record's lock; a statement after it that locked more than that
// record (a range of the index on expires_at, say) would make the replays
// of different keys wait for one another.
func TestConcurrentReplays(t *testing.T) {
	dbtest.ForEachWithTiDB(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLookupFirst(idem.LookupNever))
		ctx := context.Background()
		const keys, clients, calls = 1000, 16, 100
		tx := e.Begin(t, nil)
		for i := range keys {
			k := fmt.Sprint("k", i)
			if _, err := e.Store.Do(ctx, tx, k, dbtest.HashA, e.Effect(k, dbtest.Created)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, clients*calls)
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range calls {
					// Keys side by side in the index, a few clients on each.
					k := fmt.Sprint("k", (i*7+c*131)%keys)
					res, err := e.Store.DoTx(ctx, e.DB, nil, k, dbtest.HashA, dbtest.MustNotRun(t))
					if err == nil && res.Outcome != idem.Replay {
						t.Errorf("outcome %v, want replay", res.Outcome)
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		n := 0
		for err := range errs {
			if n == 0 {
				t.Errorf("a replay failed: %v", err)
			}
			n++
		}
		if n > 0 {
			t.Errorf("%d of %d replays failed", n, clients*calls)
		}
	})
}
