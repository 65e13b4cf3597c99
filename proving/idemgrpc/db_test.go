package idemgrpc_test

import (
	"context"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	"google.golang.org/grpc"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// target is one database and driver the interceptor runs against.
type target = dbtest.Target

// forEach runs f against SQLite and every server whose variable is set, as
// the rest of the repository's tests do, and shows each server it cannot
// reach as a skipped subtest that says how to reach it.
func forEach(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEach(t, dbtest.Targets(), f)
}

// forEachRunTarget is forEach with TiDB in its pessimistic mode after the
// other targets, for the tests of multi-step calls, which hold on every
// database.
func forEachRunTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEach(t, append(dbtest.Targets(), dbtest.TiDBRunTargets()...), f)
	dbtest.SkipMissingTiDB(t)
}

// forEachWay is forEach, with a subtest for each way that the
// interceptor reaches tg (checkout.Ways): through UnaryServerInterceptor on
// database/sql everywhere, and on PostgreSQL through pgx also through
// UnaryServerInterceptorWithRunner with idempgx.Runner on a pgx pool,
// whose handlers write through idempgx.Tx and whose phases take a pgx.Tx.
func forEachWay(t *testing.T, f func(t *testing.T, tg target, via string)) {
	t.Helper()
	forEach(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) { f(t, tg, via) })
		}
	})
}

// forEachRunTargetWay is forEachRunTarget with a subtest for each way
// that the interceptor reaches the target, as forEachWay has.
func forEachRunTargetWay(t *testing.T, f func(t *testing.T, tg target, via string)) {
	t.Helper()
	forEachRunTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) { f(t, tg, via) })
		}
	})
}

// env is one test's database, with a store on a table of its own and an
// effect table, both dropped at the end of the test.
type env struct {
	*dbtest.Env
	// via is how the interceptor reaches the database: checkout.ViaSQL,
	// on DB, or checkout.ViaPgxPool, on pool.
	via  string
	pool *pgxpool.Pool
}

// setup opens tg, makes a store on a table of its own with opts, migrates
// it, and creates an effect table; the interceptor reaches it through
// database/sql.
func setup(t *testing.T, tg target, opts ...idem.Option) *env {
	t.Helper()
	return setupVia(t, tg, checkout.ViaSQL, opts...)
}

// setupVia is setup for an interceptor that reaches the database as via
// says: through database/sql, or through a pgx pool of its own.
func setupVia(t *testing.T, tg target, via string, opts ...idem.Option) *env {
	t.Helper()
	e := &env{Env: tg.Setup(t, opts...), via: via}
	if via == checkout.ViaPgxPool {
		pool, err := pgxpool.New(context.Background(), e.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		e.pool = pool
	}
	return e
}

// interceptor returns the interceptor on store, a store of e's table, and
// e's database, as e.via says, with opts.
func (e *env) interceptor(store *idem.Store, opts ...idemgrpc.Option) (grpc.UnaryServerInterceptor, error) {
	if e.via == checkout.ViaPgxPool {
		return idemgrpc.UnaryServerInterceptorWithRunner(store, idempgx.Runner(store, e.pool, pgx.TxOptions{}), opts...)
	}
	return idemgrpc.UnaryServerInterceptor(store, e.DB, nil, opts...)
}
