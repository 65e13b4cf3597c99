package idem_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// The points at which TestProcessDeath kills the process that claimed a key.
const (
	diesAfterClaim   = "after the claim"
	diesAfterWrite   = "in fn, after its write"
	diesBeforeCommit = "after the completion, before the commit"
	diesAfterCommit  = "after the commit"
	crashChildEnv    = "IDEM_CRASH_CHILD" // set in the child process
)

// TestProcessDeath claims a key in a child process, kills the child with
// SIGKILL at each point of the claim's life, and then asks for the key from
// this process: before the commit the key must be free, with no effect left
// behind and no timeout waited out; after it, the key replays its one effect.
func TestProcessDeath(t *testing.T) {
	each := func(f func(t *testing.T, tg target)) {
		dbtest.ForEachTarget(t, f)
		dbtest.ForEachVitess(t, f)
	}
	each(func(t *testing.T, tg target) {
		for _, point := range []string{diesAfterClaim, diesAfterWrite, diesBeforeCommit, diesAfterCommit} {
			t.Run(point, func(t *testing.T) {
				const lockTimeout = 5 * time.Second
				e := setup(t, tg, idem.WithLockTimeout(lockTimeout))
				killChild(t, e, point, func() {
					if point == diesAfterCommit || dialect.CapabilitiesOf(tg.Dialect).OneWriter {
						return // SQLite would wait at BEGIN behind the child
					}
					// The child holds the key: a claim that does not
					// wait finds it in flight.
					impatient, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithLockTimeout(0))
					if err != nil {
						t.Fatal(err)
					}
					res, err := impatient.DoTx(context.Background(), e.DB, nil, "k", dbtest.HashA, dbtest.MustNotRun(t))
					dbtest.WantOutcome(t, res, err, idem.InFlight)
				})

				start := time.Now()
				res, err := e.Store.DoTx(context.Background(), e.DB, nil, "k", dbtest.HashA, e.Effect("k", dbtest.Created))
				elapsed := time.Since(start)
				want := idem.Claimed
				if point == diesAfterCommit {
					want = idem.Replay
				}
				dbtest.WantOutcome(t, res, err, want)
				dbtest.SameResponse(t, res.Response, dbtest.Created)
				// Once the child is dead, the server notices its closed
				// connection and ends its transaction (SQLite: the kernel
				// drops its file locks) at once: the claim took at most
				// 12 ms on a loaded 2-core machine under -race. A claim
				// that waited for the dead process would wait out the
				// 5 s lock timeout (on SQLite, the 10 s busy timeout).
				// Half the lock timeout, 2.5 s, is 200 times the first
				// and half the second.
				if elapsed > lockTimeout/2 {
					t.Errorf("the claim after the death took %v: it waited for the dead process", elapsed)
				}
				if n := e.EffectCount(t, "k"); n != 1 {
					t.Errorf("%d effect rows, want 1", n)
				}
			})
		}
	})
}

// killChild starts this test binary as a child that claims "k" in e's table
// and stops at point, runs check, and kills the child.
func killChild(t *testing.T, e *env, point string, check func()) {
	t.Helper()
	cmd := dbtest.StartChild(t, "TestCrashChild", point, nil,
		append(e.ChildEnv(e.tg.Driver), crashChildEnv+"=1", "IDEM_CRASH_POINT="+point)...)
	check()
	dbtest.Kill(t, cmd)
}

// TestCrashChild is the child process of TestProcessDeath; it does nothing
// in a normal run.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashChildEnv) == "" {
		t.Skip("the child process of TestProcessDeath")
	}
	child := dbtest.OpenChild(t)
	point := os.Getenv("IDEM_CRASH_POINT")
	die := dbtest.DieAt(point)
	ctx := context.Background()
	tx, err := child.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = child.Store.Do(ctx, tx, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		die(diesAfterClaim)
		if err := child.Effects.Insert(ctx, tx, "k", "from the child"); err != nil {
			return idem.Response{}, err
		}
		die(diesAfterWrite)
		return dbtest.Created, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	die(diesBeforeCommit)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	die(diesAfterCommit)
	t.Fatalf("unknown point %q", point)
}
