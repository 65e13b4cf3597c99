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

// TestRunRenewsLease holds a call for three leases while retries ask for
// the request all along: the runner renews its lease every third of it, so
// every retry answers InFlight, nobody takes the request over, and the
// provider is called once.
//
// The lease is 2 s, renewed every 667 ms: a retry could take the request
// over only if a renewal came more than 1.3 s late, which a goroutine that
// sends one UPDATE does not, even on a loaded 2-core machine. The targets
// run in parallel, since each waits 6 s.
func TestRunRenewsLease(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		if strings.Contains(tg.Name, "interpolate") {
			t.Skip("the same statements as the target without the driver's settings")
		}
		t.Parallel()
		const lease = 2 * time.Second
		e := setup(t, tg, idem.WithLease(lease))
		o := &order{e: e, key: "order-40"}
		h := holdRun(t, o)
		retries := 0
		for deadline := time.Now().Add(3 * lease); time.Now().Before(deadline); retries++ {
			retry := &order{e: e, key: o.key}
			res, err := retry.run(t, dbtest.HashA)
			if err != nil || res.Outcome != idem.InFlight {
				t.Fatalf("retry %d: %v, %v; want InFlight while the runner renews its lease", retries, res.Outcome, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		res, err := h.finish()
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if n := len(o.calls()); n != 1 {
			t.Errorf("provider called %d times, want 1", n)
		}
	})
}

// TestRunCallLeaseLost takes a request over while its runner is in a call
// (another Store's reading of the database's clock is past the lease): the
// runner's next renewal finds the request gone, cancels the call's context
// at once, and Run returns ErrLeaseLost without storing anything; the new
// runner finishes the request.
func TestRunCallLeaseLost(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		const lease = 300 * time.Millisecond
		e := setup(t, tg, idem.WithLease(lease))
		o := &order{e: e, key: "order-41"}
		inCall := make(chan struct{})
		o.charge = func(ctx context.Context, _ string) error {
			close(inCall)
			<-ctx.Done()
			return ctx.Err()
		}
		done := o.start(o.steps())
		<-inCall

		later, err := idem.New(dbtest.LeaseClock(tg, func() time.Duration { return time.Hour }).Dialect,
			idem.WithTable(e.Table), idem.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		second := &order{e: e, key: o.key}
		res, err := later.Run(ctx, e.DB, nil, second.key, dbtest.HashA, second.steps()...)
		dbtest.WantOutcome(t, res, err, idem.Claimed)

		select {
		case r := <-done:
			if !errors.Is(r.err, idem.ErrLeaseLost) {
				t.Errorf("the first runner: %v, want ErrLeaseLost", r.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the first runner's call was never cancelled")
		}
		second.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if k1, k2 := o.calls(), second.calls(); len(k1) != 1 || len(k2) != 1 {
			t.Errorf("calls %q and %q, want one each", k1, k2)
		}
	})
}

// TestRunNoTakeoverInPhase holds a phase's transaction open past the end
// of its lease, by the database's clock as a retry reads it: the retry
// answers InFlight at once, or after the lock timeout where the claim
// waits, since the open transaction holds the request (the key's lock or
// the row), and the phase commits.
func TestRunNoTakeoverInPhase(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			t.Skip("one writer at a time: the retry waits at BEGIN for the phase's write lock")
		}
		ctx := context.Background()
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond), idem.WithLease(time.Minute))
		o := &order{e: e, key: "order-42"}
		steps := o.steps()
		inPhase, letGo := make(chan struct{}), make(chan struct{})
		steps[2] = idem.Phase("charged", func(ctx context.Context, tx *sql.Tx) error {
			close(inPhase)
			<-letGo
			return o.phase("charged")(ctx, tx)
		})
		done := o.start(steps)
		<-inPhase
		later, err := idem.New(dbtest.LeaseClock(tg, func() time.Duration { return time.Hour }).Dialect,
			idem.WithTable(e.Table), idem.WithLockTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		retry := &order{e: e, key: o.key}
		res, err := later.Run(ctx, e.DB, nil, retry.key, dbtest.HashA, retry.steps()...)
		dbtest.WantOutcome(t, res, err, idem.InFlight)
		close(letGo)
		r := <-done
		dbtest.WantOutcome(t, r.res, r.err, idem.Claimed)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if n := len(retry.calls()); n != 0 {
			t.Errorf("the retry called the provider %d times", n)
		}
	})
}
