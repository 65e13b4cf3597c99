package dbtest

import (
	"database/sql"
	"os"
	"sync"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/placement"
)

// EnvCitus names the coordinator of a Citus cluster, PostgreSQL with the
// citus extension and workers of its own. No package installs Citus for
// PostgreSQL 15 on Debian, and scripts/test does not start it:
// docs/scaling.md says how to build it from source and start a coordinator
// and two workers on loopback.
const EnvCitus = "IDEM_CITUS_DSN" // postgres://user@host:port/db?sslmode=disable

// Citus runs the tests that show the PostgreSQL dialect on a distributed
// database, which name it themselves: the conformance suite, the
// contention test and the tests of the dialect's locks on Citus. It is not
// one of Servers, so the other tests leave it out.

// CitusServers lists the coordinator of EnvCitus when its variable is set,
// through lib/pq and through pgx's database/sql driver.
func CitusServers() []Server {
	dsn := os.Getenv(EnvCitus)
	if dsn == "" {
		return nil
	}
	return []Server{
		{Name: "postgres/citus/pq", Family: "postgres", Dialect: idem.Postgres(), Driver: "postgres", DSN: dsn},
		{Name: "postgres/citus/pgx", Family: "postgres", Dialect: idem.Postgres(), Driver: "pgx", DSN: dsn},
	}
}

// CitusTargets are the targets of CitusServers. Their databases
// distribute the tables that Setup makes (see Distributed).
func CitusTargets() []Target {
	ts := serverTargets(CitusServers())
	for i := range ts {
		ts[i].Distributed = true
	}
	return ts
}

// SkipCitusReason says how to run a test that needs Citus.
const SkipCitusReason = EnvCitus + " is not set: build Citus and start a coordinator with two workers as docs/scaling.md says, and name the coordinator in it"

// SkipMissingCitus adds to t a skipped subtest for Citus when its variable
// is not set.
func SkipMissingCitus(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvCitus) == "" {
		t.Run("postgres/citus", func(t *testing.T) { t.Skip(SkipCitusReason) })
	}
}

// distributed holds the databases that a Distributed target opened, for
// Setup, which gets a database and not its target: a test that opens its
// database through the target and makes its tables through Setup.
var distributed sync.Map // *sql.DB → struct{}

// markDistributed records that Setup is to distribute the tables it makes
// in db, until the end of t.
func markDistributed(t testing.TB, db *sql.DB) {
	distributed.Store(db, struct{}{})
	t.Cleanup(func() { distributed.Delete(db) })
}

// IsDistributed reports whether db was opened by a Distributed target.
func IsDistributed(db *sql.DB) bool {
	_, ok := distributed.Load(db)
	return ok
}

// Distribute spreads idem's table over the Citus workers by its key, as
// docs/scaling.md tells an operator to after Migrate, which leaves the
// table a plain one on the coordinator; and the effect table by the key
// itself, rk (see Effects), co-located with idem's table, so that a
// request's record and effects live on one worker.
func Distribute(t testing.TB, db *sql.DB, table, effects string) {
	t.Helper()
	placement.Distribute(t, db, table, "key", "")
	if effects != "" {
		placement.Distribute(t, db, effects, "rk", table)
	}
}
