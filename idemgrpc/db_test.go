package idemgrpc_test

import (
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/dbtest"
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

// env is one test's database, with a store on a table of its own and an
// effect table, both dropped at the end of the test.
type env struct {
	*dbtest.Env
}

// setup opens tg, makes a store on a table of its own with opts, migrates
// it, and creates an effect table.
func setup(t *testing.T, tg target, opts ...idem.Option) *env {
	t.Helper()
	return &env{Env: tg.Setup(t, opts...)}
}
