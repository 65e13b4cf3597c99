package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// EnvPgBouncer names the PgBouncer that scripts/test starts in front of its
// PostgreSQL, in transaction pooling mode: each transaction of a client runs
// on whichever server connection is free, so the sessions that two clients
// see are one. It serves the test database by its own name, through a pool
// big enough for all the tests at once, and as PgBouncerSingleDB, through a
// pool of one server connection.
const EnvPgBouncer = "IDEM_PGBOUNCER_DSN" // postgres://user@host:port/idem_test?sslmode=disable

// PgBouncerSingleDB is the database name under which the PgBouncer of
// EnvPgBouncer serves the test database through one server connection, so
// that every client's statements run in the same server session.
const PgBouncerSingleDB = "idem_test_single"

// PgxPoolerParams is the setting that pgx needs behind a pooler in
// transaction mode (PgBouncer before 1.21, or without
// max_prepared_statements): pgx's default prepares each statement under a
// name derived from its text and keeps it for the connection, but the
// server session it was prepared in is another client's by the next
// transaction, whose own pgx prepares the same name there again (SQLSTATE
// 42P05, TestPgBouncerPreparedStatements). exec sends each statement with
// the unnamed statement, in one round trip still.
const PgxPoolerParams = "default_query_exec_mode=exec"

// PqPoolerParams is what lib/pq needs in the DSN behind a pooler in
// transaction mode: out of a transaction, lib/pq sends a statement with
// values in two round trips by default, the Parse of the unnamed statement
// and then its Bind, and the pooler may give the server session to another
// client between the two, whose own statement the Bind then meets
// (TestPgBouncerLibPqBinaryParameters). binary_parameters=yes sends the
// Parse, the Bind and the Execute in one round trip.
const PqPoolerParams = "binary_parameters=yes"

// PgBouncer runs the tests that show idem behind a pooler, which name it
// themselves: the conformance suite and the contention test. It is not one
// of Servers, so the other tests leave it out.

// PgBouncerServers lists PgBouncer when its variable is set, through lib/pq
// with PqPoolerParams and through pgx's database/sql driver with
// PgxPoolerParams.
func PgBouncerServers() []Server {
	dsn := os.Getenv(EnvPgBouncer)
	if dsn == "" {
		return nil
	}
	return []Server{
		{Name: "postgres/pgbouncer/pq", Family: "postgres", Dialect: idem.Postgres(), Driver: "postgres", DSN: WithParams(dsn, PqPoolerParams)},
		{Name: "postgres/pgbouncer/pgx", Family: "postgres", Dialect: idem.Postgres(), Driver: "pgx", DSN: WithParams(dsn, PgxPoolerParams)},
	}
}

// PgBouncerTargets are the targets of PgBouncerServers.
func PgBouncerTargets() []Target { return serverTargets(PgBouncerServers()) }

// PgBouncerDSN returns the PgBouncer of EnvPgBouncer, or "" when its
// variable is not set.
func PgBouncerDSN() string { return os.Getenv(EnvPgBouncer) }

// PgBouncerSingle returns dsn, a URL of the PgBouncer of EnvPgBouncer, with
// the database PgBouncerSingleDB in place of the test database.
func PgBouncerSingle(dsn string) string {
	path, query, _ := strings.Cut(dsn, "?")
	if i := strings.LastIndex(path, "/"); i >= 0 {
		path = path[:i+1] + PgBouncerSingleDB
	}
	if query == "" {
		return path
	}
	return path + "?" + query
}

// SkipPgBouncerReason says how to run a test that needs PgBouncer.
const SkipPgBouncerReason = EnvPgBouncer + " is not set: run scripts/test, which starts PgBouncer in front of PostgreSQL"

// SkipMissingPgBouncer adds to t a skipped subtest for PgBouncer when its
// variable is not set.
func SkipMissingPgBouncer(t *testing.T) {
	t.Helper()
	if os.Getenv(EnvPgBouncer) == "" {
		t.Run("postgres/pgbouncer", func(t *testing.T) { t.Skip(SkipPgBouncerReason) })
	}
}

// PgBouncerSingleSession returns the data source of PgBouncerSingleDB for
// t, through driver (a database/sql driver for PostgreSQL that t's package
// imports), and gives t its one server session to itself: it waits for the
// other tests that asked for it, in any package, to end, and deallocates
// the prepared statements that they, or an earlier run, left in it. So the
// statements that t's clients prepare there meet only each other's. It
// skips t unless both PostgreSQL's and PgBouncer's variables are set.
func PgBouncerSingleSession(t testing.TB, driver string) string {
	t.Helper()
	bouncer, direct := PgBouncerDSN(), os.Getenv(EnvPostgres)
	if bouncer == "" || direct == "" {
		t.Skip(SkipPgBouncerReason)
	}
	ctx := context.Background()
	// A session lock on PostgreSQL itself, not through PgBouncer, which
	// would not keep the session: the two-key form, which no lock of idem's
	// (one bigint key) can be.
	db, err := sql.Open(driver, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // ends the session, and its lock
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(1684366189, 1)"); err != nil {
		t.Fatalf("lock the single session: %v", err)
	}
	single := PgBouncerSingle(bouncer)
	sdb, err := sql.Open(driver, single)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	// No arguments: both drivers send it in the simple protocol, which
	// prepares nothing.
	if _, err := sdb.ExecContext(ctx, "DEALLOCATE ALL"); err != nil {
		t.Fatalf("deallocate the single session's statements: %v", err)
	}
	return single
}

// PgxExecModes are the query exec modes of pgx that
// TestPgBouncerPreparedStatements runs behind PgBouncer, in proving/dialect
// and in proving/idempgx: pgx's default (Mode ""), which Fails there, and
// the two that prepare no named statement.
var PgxExecModes = []struct {
	Mode  string // default_query_exec_mode, "" for pgx's default
	Fails bool
}{{Mode: "", Fails: true}, {Mode: "exec"}, {Mode: "simple_protocol"}}

// PgxExecModeName names mode in a subtest: "default" for pgx's own.
func PgxExecModeName(mode string) string {
	if mode == "" {
		return "default"
	}
	return mode
}

// WantPreparedStatementClash fails t unless err, the error of the second
// client's DoTx behind a pooler, is PostgreSQL's SQLSTATE 42P05 (a
// prepared statement that already exists) with the hint that says what to
// set, and the request left no effect.
func WantPreparedStatementClash(t testing.TB, err error, effects int) {
	t.Helper()
	// pgconn.PgError's method, so that this package links no driver.
	var coded interface{ SQLState() string }
	if !errors.As(err, &coded) || coded.SQLState() != "42P05" {
		t.Fatalf("the second client's DoTx: %v; want SQLSTATE 42P05 (prepared statement already exists)", err)
	}
	if !strings.Contains(err.Error(), PgxPoolerParams) {
		t.Errorf("the error does not say what to set: %v", err)
	}
	t.Log(err)
	if effects != 0 {
		t.Errorf("the failed request left %d effects", effects)
	}
}
