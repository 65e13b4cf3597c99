package idemhttp_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// forEachCallKeyTarget is forEachRunTarget, then PgBouncer and Vitess:
// the call keys that a provider sees are the same on every database.
func forEachCallKeyTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	all := append(targets(), dbtest.TiDBRunTargets()...)
	all = append(all, dbtest.PgBouncerTargets()...)
	dbtest.ForEach(t, append(all, dbtest.VitessTargets()...), f)
	dbtest.SkipMissingTiDB(t)
	dbtest.SkipMissingPgBouncer(t)
	dbtest.SkipMissingVitess(t)
}

// stepsService is the checkout served by Steps on e's table, via
// database/sql or a pgx pool, calling p, for a service made with
// WithSingleClient.
func stepsService(e *env, via string, p *checkout.Provider) checkout.Service {
	return checkout.Service{
		Env: e.Env, Provider: p,
		Stored: func(key string) string { return idemhttp.StoredKey("", key) },
		Serve: func(t *testing.T, store *idem.Store) checkout.Client {
			srv := httptest.NewServer(checkoutHandler(t, via, store, e.DB, e.DSN, e.Effects, p.URL(), nil))
			t.Cleanup(srv.Close)
			return func(key string) (string, error) {
				r, err := order(srv.URL, key, "book")
				if err != nil {
					return "", err
				}
				var body struct{ Charge string }
				if err := json.Unmarshal(r.body, &body); r.status != http.StatusCreated || err != nil {
					return "", fmt.Errorf("answered %v", r)
				}
				return body.Charge, nil
			}
		},
	}
}

// TestStepsCallKeysPerCustomer serves one key's checkout to two customers
// through Steps, on a Store with a shard column that a middleware in
// front of idemhttp's, made with WithSingleClient, gives the customer:
// each customer's record sends a call key of its own, so that the
// provider charges each once, and each one's retry replays its own charge.
func TestStepsCallKeysPerCustomer(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				e, orders := tg.SetupByCustomer(t)
				p := checkout.NewProvider(t)
				steps := func(ctx context.Context, key string) ([]idem.Step, error) {
					customer, err := customerOf(ctx)
					return checkout.ForCustomer[*sql.Tx]{Ops: checkout.SQLOps, Orders: orders, URL: p.URL(), Customer: customer, Key: key}.Steps(), err
				}
				var m *idemhttp.Middleware
				if via == checkout.ViaPgxPool {
					steps = func(ctx context.Context, key string) ([]idem.Step, error) {
						customer, err := customerOf(ctx)
						return checkout.ForCustomer[pgx.Tx]{Ops: checkout.PgxOps, Orders: orders, URL: p.URL(), Customer: customer, Key: key}.Steps(), err
					}
					var err error
					if m, err = idempgx.NewMiddleware(e.Store, newPool(t, e.DSN), pgx.TxOptions{}, idemhttp.WithSingleClient()); err != nil {
						t.Fatal(err)
					}
				} else {
					m = mustNew(t, e.Store, e.DB, idemhttp.WithSingleClient())
				}
				srv := start(t, byCustomer(m.Steps(func(r *http.Request) ([]idem.Step, error) {
					return steps(r.Context(), r.Header.Get("Idempotency-Key"))
				})))
				checkout.CustomerCallKeys(t, p, func(customer int64, key string) (string, error) {
					r := sendAs(t, srv, fmt.Sprint(customer), key)
					if r.status != http.StatusCreated {
						return "", fmt.Errorf("answered %v", r)
					}
					return string(r.body), nil
				})
			})
		}
	})
}

// TestStepsNewRecordNewCallKeys serves a key's checkout through Steps
// again after ReleaseUndone, after Forget and after its record expired:
// each time the request is a new one, and the provider charges it anew
// under a new call key (checkout.NewRecordCallKeys).
func TestStepsNewRecordNewCallKeys(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				checkout.NewRecordCallKeys(t, stepsService(setup(t, tg), via, checkout.NewProvider(t)))
			})
		}
	})
}

// TestStepsCallKeyWithoutIncarnation resumes, through Steps, a request
// whose record was created before its table had an incarnation: it sends
// the call key that it sent before the upgrade, idem.CallKey(stored key,
// step), and the provider answers with the charge it made then
// (checkout.CallKeyWithoutIncarnation).
func TestStepsCallKeyWithoutIncarnation(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				checkout.CallKeyWithoutIncarnation(t, stepsService(setup(t, tg), via, checkout.NewProvider(t)))
			})
		}
	})
}
