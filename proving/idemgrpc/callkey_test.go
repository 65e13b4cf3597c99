package idemgrpc_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// forEachCallKeyTarget is forEachRunTarget, then PgBouncer and Vitess:
// the call keys that a provider sees are the same on every database.
func forEachCallKeyTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	all := append(dbtest.Targets(), dbtest.TiDBRunTargets()...)
	all = append(all, dbtest.PgBouncerTargets()...)
	dbtest.ForEach(t, append(all, dbtest.VitessTargets()...), f)
	dbtest.SkipMissingTiDB(t)
	dbtest.SkipMissingPgBouncer(t)
	dbtest.SkipMissingVitess(t)
}

// runService is the checkout served by Run, in Checkout of a shop on e's
// table made with WithSingleClient, calling p.
func runService(e *env, p *checkout.Provider) checkout.Service {
	return checkout.Service{
		Env: e.Env, Provider: p,
		Stored: func(key string) string { return idemgrpc.StoredKey("", key) },
		Serve: func(t *testing.T, store *idem.Store) checkout.Client {
			conn := startCheckout(t, e, store, p.URL(), nil)
			return func(key string) (string, error) {
				a := order(conn, key, "book")
				if a.err != nil {
					return "", a.err
				}
				return chargeOf(a), nil
			}
		},
	}
}

// TestRunCallKeysPerCustomer serves one key's checkout to two customers
// through Run, on a Store with a shard column that an interceptor in
// front of idemgrpc's, made with WithSingleClient, gives the customer:
// each customer's record sends a call key of its own, so that the
// provider charges each once, and each one's retry replays its own charge.
func TestRunCallKeysPerCustomer(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		e, orders := tg.SetupByCustomer(t)
		p := checkout.NewProvider(t)
		conn := serveByCustomer(t, e, &orderShop{orders: orders, provider: p.URL()}, idemgrpc.WithStepMethods(checkoutMethod))
		checkout.CustomerCallKeys(t, p, func(customer int64, key string) (string, error) {
			a := callAs(conn, checkoutMethod, fmt.Sprint(customer), key)
			if a.err != nil {
				return "", a.err
			}
			return a.reply.(*structpb.Struct).GetFields()["charge"].GetStringValue(), nil
		})
	})
}

// TestRunNewRecordNewCallKeys serves a key's checkout through Run again
// after ReleaseUndone, after Forget and after its record expired: each
// time the call is a new request, and the provider charges it anew under
// a new call key (checkout.NewRecordCallKeys).
func TestRunNewRecordNewCallKeys(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		checkout.NewRecordCallKeys(t, runService(setup(t, tg), checkout.NewProvider(t)))
	})
}

// TestRunCallKeyWithoutIncarnation resumes, through Run, a request whose
// record was created before its table had an incarnation: it sends the
// call key that it sent before the upgrade, idem.CallKey(stored key,
// step), and the provider answers with the charge it made then
// (checkout.CallKeyWithoutIncarnation).
func TestRunCallKeyWithoutIncarnation(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		checkout.CallKeyWithoutIncarnation(t, runService(setup(t, tg), checkout.NewProvider(t)))
	})
}
