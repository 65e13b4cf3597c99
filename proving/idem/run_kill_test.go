package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// runChildEnv is set in the service process of TestRunSurvivesKills.
const runChildEnv = "IDEM_RUN_CHILD"

// checkoutSteps are the steps of the checkout key on database/sql.
func checkoutSteps(fx *dbtest.Effects, url, key string, die func(point string)) []idem.Step {
	return checkout.Checkout[*sql.Tx]{Ops: checkout.SQLOps, Effects: fx, URL: url, Key: key, Die: die}.Steps()
}

// pgxCheckoutSteps are the steps of the checkout key on pgx.
func pgxCheckoutSteps(fx *dbtest.Effects, url, key string, die func(point string)) []idem.Step {
	return checkout.Checkout[pgx.Tx]{Ops: checkout.PgxOps, Effects: fx, URL: url, Key: key, Die: die}.Steps()
}

// TestRunSurvivesKills runs two checkouts in a service process and kills it
// with SIGKILL at one boundary of their steps, for each boundary in turn.
// Then clients retry the first checkout concurrently, and Resume takes
// the second, whose client gave up. Every checkout must end finished, with
// one charge at the provider, one effect per phase, a second call only when
// the kill fell between the call and the next phase's commit, and every
// answer the stored response.
func TestRunSurvivesKills(t *testing.T) {
	f := func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) { testRunSurvivesKills(t, tg, via) })
		}
	}
	dbtest.ForEachTarget(t, f)
	dbtest.ForEachVitess(t, f)
}

// runCheckout runs the checkout of key on e's store and database, or,
// with a pool, through idempgx on the pool.
func runCheckout(e *env, pool *pgxpool.Pool, url, key string, die func(string)) (idem.Result, error) {
	if pool == nil {
		return e.Store.Run(context.Background(), e.DB, nil, key, dbtest.HashA, checkoutSteps(e.Effects, url, key, die)...)
	}
	return idempgx.New(e.Store).Run(context.Background(), pool, pgx.TxOptions{}, key, dbtest.HashA, pgxCheckoutSteps(e.Effects, url, key, die)...)
}

// newPool returns a pgx pool of dsn, closed at the end of the test.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// testRunSurvivesKills is TestRunSurvivesKills on tg, with the checkout run
// via database/sql or a pgx pool.
func testRunSurvivesKills(t *testing.T, tg target, via string) {
	for _, point := range checkout.Points {
		t.Run(point, func(t *testing.T) {
			var pool *pgxpool.Pool
			// The service's leases run on the database's real
			// clock; the clients' reading of it is ahead by more
			// than a lease, so the dead service's leases have run
			// out for them at once, while among themselves theirs
			// run as usual. Their own clock is ahead as much, for
			// Resume's age.
			ahead := idem.DefaultLease + time.Minute
			e := setup(t, dbtest.LeaseClock(tg, func() time.Duration { return ahead }),
				idem.WithClock(func() time.Time { return time.Now().Add(ahead) }))
			if via == checkout.ViaPgxPool {
				pool = newPool(t, e.DSN)
			}
			p := checkout.NewProvider(t)
			retried, abandoned := "checkout-retried", "checkout-abandoned"
			for _, key := range []string{retried, abandoned} {
				killService(t, e, via, p.URL(), point, key)
			}

			const clients = 4
			answers := checkout.Together(t, clients, func() (idem.Result, error) { return retryUntilDone(e, pool, p.URL(), retried) })

			var err error
			if pool != nil {
				steps := func(_ context.Context, key string) ([]idem.Step, error) {
					return pgxCheckoutSteps(e.Effects, p.URL(), key, func(string) {}), nil
				}
				_, err = idempgx.New(e.Store).Resume(context.Background(), pool, pgx.TxOptions{}, steps, idem.ResumeOlderThan(time.Minute))
			} else {
				steps := func(_ context.Context, key string) ([]idem.Step, error) {
					return checkoutSteps(e.Effects, p.URL(), key, func(string) {}), nil
				}
				_, err = e.Store.Resume(context.Background(), e.DB, nil, steps, idem.ResumeOlderThan(time.Minute))
			}
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}

			for _, key := range []string{retried, abandoned} {
				stored, err := e.Store.Lookup(context.Background(), e.DB, key)
				dbtest.WantOutcome(t, stored, err, idem.Replay)
				if !strings.HasPrefix(string(stored.Response.Body), "ch_") {
					t.Errorf("%s: stored body %q, want the charge's id", key, stored.Response.Body)
				}
				checkout.Effects(t, e.Effects, key, string(stored.Response.Body))
				calls, charges := p.Counts(key)
				wantCalls := checkout.CallsAfterKill(point)
				if charges != 1 || calls != wantCalls {
					t.Errorf("%s: %d calls and %d charges at the provider, want %d and 1", key, calls, charges, wantCalls)
				}
				if key == retried {
					for _, res := range answers {
						dbtest.SameResponse(t, res.Response, stored.Response)
					}
					if len(answers) != clients {
						t.Errorf("%d of %d clients got an answer", len(answers), clients)
					}
				}
			}
			if list, err := e.Store.Unfinished(context.Background(), e.DB, 0, 10); err != nil || len(list) != 0 {
				t.Errorf("unfinished at the end: %+v, %v", list, err)
			}
		})
	}
}

// retryUntilDone is a client that retries the checkout key until it gets a
// final answer: InFlight means another client runs it, so it asks again.
func retryUntilDone(e *env, pool *pgxpool.Pool, url, key string) (idem.Result, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		res, err := runCheckout(e, pool, url, key, func(string) {})
		switch {
		case errors.Is(err, idem.ErrLeaseLost):
			return res, fmt.Errorf("a client lost its lease: %w", err)
		case err != nil && !errors.Is(err, idem.ErrRetry):
			return res, err
		case err == nil && res.Outcome != idem.InFlight:
			return res, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return idem.Result{}, errors.New("no final answer within a minute")
}

// killService starts this test binary as a service that runs the checkout
// of key, waits until it has reached point, and kills it.
func killService(t *testing.T, e *env, via, url, point, key string) {
	t.Helper()
	cmd := dbtest.StartChild(t, "TestRunChild", point, nil, append(e.ChildEnv(e.tg.Driver),
		runChildEnv+"=1",
		"IDEM_RUN_VIA="+via,
		"IDEM_RUN_PROVIDER="+url,
		"IDEM_RUN_POINT="+point,
		"IDEM_RUN_KEY="+key,
	)...)
	dbtest.Kill(t, cmd)
}

// TestRunChild is the service process of TestRunSurvivesKills; it does
// nothing in a normal run.
func TestRunChild(t *testing.T) {
	if os.Getenv(runChildEnv) == "" {
		t.Skip("the service process of TestRunSurvivesKills")
	}
	child := dbtest.OpenChild(t)
	point, key := os.Getenv("IDEM_RUN_POINT"), os.Getenv("IDEM_RUN_KEY")
	die := dbtest.DieAt(point)
	url := os.Getenv("IDEM_RUN_PROVIDER")
	var err error
	if os.Getenv("IDEM_RUN_VIA") == checkout.ViaPgxPool {
		_, err = idempgx.New(child.Store).Run(context.Background(), newPool(t, child.DSN), pgx.TxOptions{}, key, dbtest.HashA, pgxCheckoutSteps(child.Effects, url, key, die)...)
	} else {
		_, err = child.Store.Run(context.Background(), child.DB, nil, key, dbtest.HashA, checkoutSteps(child.Effects, url, key, die)...)
	}
	if err == nil {
		die(checkout.AfterConfirmCommit)
	}
	t.Fatalf("the checkout ended before %s: %v", point, err)
}

// TestRunProviderFaults has the provider fail a call, and answer another
// too late for its caller, after charging: each time the retry calls again
// with the same key, and the provider charges once.
func TestRunProviderFaults(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		p := checkout.NewProvider(t)
		run := func(ctx context.Context, key string) (idem.Result, error) {
			return e.Store.Run(ctx, e.DB, nil, key, dbtest.HashA, checkoutSteps(e.Effects, p.URL(), key, func(string) {})...)
		}
		p.FailNext(1)
		if _, err := run(context.Background(), "fails"); err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("Run: %v, want the provider's 500", err)
		}
		charged, release := p.HoldAnswers()
		ctx, cancel := context.WithCancel(context.Background())
		gaveUp := make(chan error, 1)
		go func() {
			_, err := run(ctx, "slow")
			gaveUp <- err
		}()
		<-charged // the caller gives up after the provider charged, before its answer
		cancel()
		err := <-gaveUp
		release()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want the caller's cancellation", err)
		}

		for _, key := range []string{"fails", "slow"} {
			res, err := run(context.Background(), key)
			dbtest.WantOutcome(t, res, err, idem.Claimed)
			if calls, charges := p.Counts(key); calls != 2 || charges != 1 {
				t.Errorf("%s: %d calls and %d charges, want 2 and 1", key, calls, charges)
			}
			if notes := e.Effects.Notes(t)[key]; len(notes) != 3 {
				t.Errorf("%s: effects %q, want each phase once", key, notes)
			}
		}
	})
}

// TestRunRecoversAfterKill kills the service right after its call to the
// provider, with no clock moved: a client that retries when the InFlight
// answer's LeaseLeft has passed takes the request over, on the database's
// own clock, within two DefaultLeases of the kill, and finishes it. The
// test prints the time it took. The targets run in parallel, since each
// waits out a real lease.
func TestRunRecoversAfterKill(t *testing.T) {
	each := func(f func(t *testing.T, tg target)) {
		dbtest.ForEachTarget(t, f)
		dbtest.ForEachVitess(t, f)
	}
	each(func(t *testing.T, tg target) {
		if strings.Contains(tg.Name, "interpolate") {
			t.Skip("the same statements as the target without the driver's settings")
		}
		t.Parallel()
		e := setup(t, tg)
		p := checkout.NewProvider(t)
		const key = "checkout-killed"
		killService(t, e, checkout.ViaSQL, p.URL(), checkout.AfterCall, key)
		killed := time.Now()
		for inFlight := 0; ; inFlight++ {
			res, err := e.Store.Run(context.Background(), e.DB, nil, key, dbtest.HashA, checkoutSteps(e.Effects, p.URL(), key, func(string) {})...)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != idem.InFlight {
				took := time.Since(killed)
				t.Logf("%s: %v from the kill to the retry's answer, after %d InFlight answers", tg.Name, took.Round(time.Millisecond), inFlight)
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				if took > 2*idem.DefaultLease {
					t.Errorf("took %v, want at most 2 × DefaultLease, %v", took, 2*idem.DefaultLease)
				}
				break
			}
			if res.LeaseLeft <= 0 || res.LeaseLeft > idem.DefaultLease || time.Since(killed) > 2*idem.DefaultLease {
				t.Fatalf("InFlight with %v of the lease left, %v after the kill", res.LeaseLeft, time.Since(killed))
			}
			time.Sleep(res.LeaseLeft)
		}
		if calls, charges := p.Counts(key); calls != 2 || charges != 1 {
			t.Errorf("%d calls and %d charges at the provider, want 2 and 1", calls, charges)
		}
	})
}
