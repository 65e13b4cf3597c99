package idem_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// forEachCallKeyTarget runs f on every target of multi-step requests,
// then behind PgBouncer and on Vitess, or shows them skipped: the call
// keys that a provider sees are the same on every database.
func forEachCallKeyTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEachRunTarget(t, f)
	for _, tg := range dbtest.PgBouncerTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	dbtest.SkipMissingPgBouncer(t)
	dbtest.ForEachVitess(t, f)
}

// answered is the charge of a checkout's answer, or an error for an
// answer that is not its final response.
func answered(res idem.Result, err error) (string, error) {
	switch {
	case err != nil:
		return "", err
	case res.Outcome != idem.Claimed && res.Outcome != idem.Replay:
		return "", fmt.Errorf("answered %v", res.Outcome)
	}
	return string(res.Response.Body), nil
}

// checkoutService is the checkout of Store.Run on e's table, run via
// database/sql or a pgx pool, calling p.
func checkoutService(e *env, via string, p *checkout.Provider) checkout.Service {
	return checkout.Service{
		Env: e.Env, Provider: p,
		Stored: func(key string) string { return key },
		Serve: func(t *testing.T, store *idem.Store) checkout.Client {
			ctx := context.Background()
			if via == checkout.ViaPgxPool {
				pool, pg := newPool(t, e.DSN), idempgx.New(store)
				return func(key string) (string, error) {
					return answered(pg.Run(ctx, pool, pgx.TxOptions{}, key, dbtest.HashA, pgxCheckoutSteps(e.Effects, p.URL(), key, nil)...))
				}
			}
			return func(key string) (string, error) {
				return answered(store.Run(ctx, e.DB, nil, key, dbtest.HashA, checkoutSteps(e.Effects, p.URL(), key, nil)...))
			}
		},
	}
}

// TestRunCallKeysPerCustomer runs one key's checkout for two customers,
// on a Store with a shard column, through Store.Run and idempgx: each
// customer's record sends a call key of its own, so that the provider
// charges each once, and each one's retry replays its own charge.
func TestRunCallKeysPerCustomer(t *testing.T) {
	f := func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				e, orders := tg.SetupByCustomer(t)
				p := checkout.NewProvider(t)
				bg := context.Background()
				order := func(customer int64, key string) (string, error) {
					return answered(e.Store.Run(idem.WithShard(bg, customer), e.DB, nil, key, dbtest.HashA,
						checkout.ForCustomer[*sql.Tx]{Ops: checkout.SQLOps, Orders: orders, URL: p.URL(), Customer: customer, Key: key}.Steps()...))
				}
				if via == checkout.ViaPgxPool {
					pool, pg := newPool(t, e.DSN), idempgx.New(e.Store)
					order = func(customer int64, key string) (string, error) {
						return answered(pg.Run(idem.WithShard(bg, customer), pool, pgx.TxOptions{}, key, dbtest.HashA,
							checkout.ForCustomer[pgx.Tx]{Ops: checkout.PgxOps, Orders: orders, URL: p.URL(), Customer: customer, Key: key}.Steps()...))
					}
				}
				checkout.CustomerCallKeys(t, p, order)
			})
		}
	}
	forEachCallKeyTarget(t, f)
	dbtest.ForEachCitus(t, f)
}

// TestRunNewRecordNewCallKeys runs a key's checkout again after
// ReleaseUndone, after Forget and after its record expired, through
// Store.Run and idempgx: each time the request is a new one, and the
// provider charges it anew under a new call key (checkout.NewRecordCallKeys).
func TestRunNewRecordNewCallKeys(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				checkout.NewRecordCallKeys(t, checkoutService(setup(t, tg), via, checkout.NewProvider(t)))
			})
		}
	})
}

// TestRunCallKeyWithoutIncarnation resumes, through Store.Run and
// idempgx, a request whose record was created before its table had an
// incarnation: it sends the call key that it sent before the upgrade,
// idem.CallKey(key, step), and the provider answers with the charge it
// made then (checkout.CallKeyWithoutIncarnation).
func TestRunCallKeyWithoutIncarnation(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				checkout.CallKeyWithoutIncarnation(t, checkoutService(setup(t, tg), via, checkout.NewProvider(t)))
			})
		}
	})
}

// TestRunCallKeyAfterKill kills two checkouts' service with SIGKILL after
// their call, before the next phase, then has a client retry the first
// and Resume take the second: each resumed request calls the provider
// again with the call key that the killed one sent, and the provider
// charges once.
func TestRunCallKeyAfterKill(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				// As in TestRunSurvivesKills: the dead service's leases
				// have run out at once for the clients and Resume.
				ahead := idem.DefaultLease + time.Minute
				e := setup(t, dbtest.LeaseClock(tg, func() time.Duration { return ahead }),
					idem.WithClock(func() time.Time { return time.Now().Add(ahead) }))
				p := checkout.NewProvider(t)
				retried, resumed := "checkout-retried", "checkout-resumed"
				sent := map[string][]string{}
				for _, key := range []string{retried, resumed} {
					killService(t, e, via, p.URL(), checkout.AfterCall, key)
					sent[key] = p.Keys(key)
					if len(sent[key]) != 1 {
						t.Fatalf("%s: the killed service sent call keys %q, want one", key, sent[key])
					}
				}
				s := checkoutService(e, via, p)
				if _, err := s.Serve(t, e.Store)(retried); err != nil {
					t.Fatalf("the retry: %v", err)
				}
				steps := func(_ context.Context, key string) ([]idem.Step, error) {
					return checkoutSteps(e.Effects, p.URL(), key, nil), nil
				}
				if rep, err := e.Store.Resume(context.Background(), e.DB, nil, steps, idem.ResumeOlderThan(time.Minute)); err != nil || rep.Finished != 1 {
					t.Fatalf("Resume: %+v, %v; want one finished", rep, err)
				}
				for _, key := range []string{retried, resumed} {
					if keys := p.Keys(key); len(keys) != 1 || keys[0] != sent[key][0] {
						t.Errorf("%s: call keys %q, want the killed service's %q alone", key, keys, sent[key])
					}
					if calls, charges := p.Counts(key); calls != 2 || charges != 1 {
						t.Errorf("%s: %d calls and %d charges, want 2 and 1", key, calls, charges)
					}
				}
			})
		}
	})
}
