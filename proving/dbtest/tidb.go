package dbtest

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

// EnvTiDB names TiDB's server, which scripts/test starts only when asked
// (see docs/testing.md): building it takes minutes.
const EnvTiDB = "IDEM_TIDB_DSN" // user@tcp(host:port)/db

// TiDB runs the tests that show the TiDB dialect's contract, which name it
// themselves: the conformance suite, the contention test and the
// load test. It is not one of Servers, so the other tests leave it out.

// TiDBServers lists TiDB when its variable is set, in each of its
// transaction modes: pessimistic, its default, and optimistic, whose
// dialect declares that claims meet at commit.
func TiDBServers() []Server {
	dsn := os.Getenv(EnvTiDB)
	if dsn == "" {
		return nil
	}
	return []Server{
		{Name: "tidb", Family: "mysql", Dialect: idem.TiDB(), Driver: "mysql", DSN: dsn},
		{Name: "tidb/optimistic", Family: "mysql", Dialect: optimistic{idem.TiDB()}, Driver: "mysql",
			DSN: WithParams(dsn, "tidb_txn_mode=%27optimistic%27")},
	}
}

// optimistic is a dialect used on TiDB in optimistic mode, where a claim
// does not see a key held by another transaction and the race is settled at
// commit.
type optimistic struct{ idem.Dialect }

// ShardColumnSchema, ShardColumnStatements and ShardColumnCheck are TiDB's,
// so that the properties of a table with a shard column run in optimistic
// mode too: an embedded dialect's optional interfaces are not the
// embedding type's.
func (d optimistic) ShardColumnSchema(table string, kind dialect.ShardKind) []string {
	return d.Dialect.(dialect.ShardColumn).ShardColumnSchema(table, kind)
}

func (d optimistic) ShardColumnStatements(table string, kind dialect.ShardKind, lockTimeout time.Duration) dialect.Statements {
	return d.Dialect.(dialect.ShardColumn).ShardColumnStatements(table, kind, lockTimeout)
}

func (d optimistic) ShardColumnCheck(table string, kind dialect.ShardKind) (string, string) {
	return d.Dialect.(dialect.ShardColumn).ShardColumnCheck(table, kind)
}

func (d optimistic) Capabilities() dialect.Capabilities {
	c := dialect.CapabilitiesOf(d.Dialect)
	c.ConflictAtCommit = true
	return c
}

// TiDBTargets are the targets of TiDBServers.
func TiDBTargets() []Target { return serverTargets(TiDBServers()) }

// SkipMissingTiDB adds to t a skipped subtest for TiDB when its variable is
// not set.
func SkipMissingTiDB(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvTiDB) == "" {
		t.Run("tidb", func(t *testing.T) {
			t.Skip(EnvTiDB + " is not set: run IDEM_TIDB=1 scripts/test, which builds and starts TiDB (docs/testing.md)")
		})
	}
}

// WithParams adds params (a=b&c=d) to the query string of dsn, a
// go-sql-driver/mysql DSN or a PostgreSQL URL, as the IDEM_*_DSN variables
// give them.
func WithParams(dsn, params string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + params
	}
	return dsn + "?" + params
}

// TiDBRunTargets is TiDB's pessimistic target, for the tests of multi-step
// requests outside the root package: the optimistic target wraps the
// dialect, and a dialect from outside the module's has no statements for
// them.
func TiDBRunTargets() []Target {
	var run []Target
	for _, tg := range TiDBTargets() {
		if !strings.HasSuffix(tg.Name, "/optimistic") {
			run = append(run, tg)
		}
	}
	return run
}
