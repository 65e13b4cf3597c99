package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/placement"
)

// EnvVitess names Vitess's vtgate, which scripts/test starts only when
// asked (IDEM_VITESS=1), in front of a keyspace idem_test of two shards.
const EnvVitess = "IDEM_VITESS_DSN" // user:password@tcp(host:port)/idem_test

// VitessParams are the connection settings of the Vitess target: the
// session's lock wait, which bounds the Vitess dialect's claim
// (idem.Vitess says why), and transaction_mode single, so that a test
// whose transaction would write on two shards fails, whatever the vtgate's
// default.
const VitessParams = "innodb_lock_wait_timeout=1&transaction_mode=%27single%27"

// VitessServers lists vtgate when its variable is set. Like TiDB, it is not
// one of Servers: the tests that show the Vitess dialect's contract name it.
func VitessServers() []Server {
	dsn := os.Getenv(EnvVitess)
	if dsn == "" {
		return nil
	}
	return []Server{{Name: "vitess", Family: "mysql", Dialect: idem.Vitess(), Driver: "mysql", DSN: WithParams(dsn, VitessParams)}}
}

// VitessTargets are the targets of VitessServers.
func VitessTargets() []Target { return serverTargets(VitessServers()) }

// SkipMissingVitess adds to t a skipped subtest for Vitess when its
// variable is not set.
func SkipMissingVitess(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvVitess) == "" {
		t.Run("vitess", func(t *testing.T) {
			t.Skip(EnvVitess + " is not set: run IDEM_VITESS=1 scripts/test, which builds and starts Vitess")
		})
	}
}

// AddVindex shards table, on Vitess's keyspace, by column with the
// keyspace's xxhash vindex, and takes the table out of the VSchema at the
// end of t, before a cleanup registered earlier drops it: for a test's own
// tables beside those of Setup, which it shards itself.
func AddVindex(t testing.TB, db *sql.DB, table, column string) {
	t.Helper()
	placement.AddVindex(t, db, table, column)
}

// ShardOf returns the shard of Vitess's keyspace, such as "-80", where the
// xxhash vindex puts value, as vtgate computes it, without reaching a shard:
// q may be a transaction that must stay on one.
func ShardOf(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, value any) (string, error) {
	var shard string
	err := q.QueryRowContext(ctx, "SELECT shard FROM xxhash WHERE id = ?", value).Scan(&shard)
	return shard, err
}

// VitessError returns the server error that err wraps, failing t, with
// what in the message, when err is not one: vtgate answers as a MySQL
// server does.
func VitessError(t *testing.T, what string, err error) *mysql.MySQLError {
	t.Helper()
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		t.Fatalf("%s: %v, want a server error", what, err)
	}
	return my
}
