package dbtest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/testhook"
)

// What the tests of a Store's behaviour share, in proving/idem and, for
// those about one database, proving/dialect: the targets they run on, the
// requests and responses they send, and how they check an answer.

var (
	// HashA and HashB are the hashes of two different requests.
	HashA = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":88}`))
	HashB = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":89}`))

	// Created is a response with every part that must survive a replay.
	Created = idem.Response{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "", "b"}},
		Body:   []byte("{\"order\":1}\x00\xff\n"),
	}

	// Replayed is the response of a request that took a record over.
	Replayed = idem.Response{Status: 200, Body: []byte(`{"order":2}`)}
)

// SameResponse fails t unless got is want, status, header and body.
func SameResponse(t *testing.T, got, want idem.Response) {
	t.Helper()
	if got.Status != want.Status || !reflect.DeepEqual(got.Header, want.Header) || !bytes.Equal(got.Body, want.Body) {
		t.Errorf("response = %d %v %q, want %d %v %q", got.Status, got.Header, got.Body, want.Status, want.Header, want.Body)
	}
}

// WantOutcome stops t unless a call answered want without an error.
func WantOutcome(t *testing.T, res idem.Result, err error, want idem.Outcome) {
	t.Helper()
	if err != nil {
		t.Fatalf("Do: %v, want outcome %v", err, want)
	}
	if res.Outcome != want {
		t.Fatalf("outcome = %v, want %v", res.Outcome, want)
	}
}

// MustNotRun is a Func that fails the test if it runs.
func MustNotRun(t *testing.T) idem.Func {
	return func(context.Context, *sql.Tx) (idem.Response, error) {
		t.Error("fn ran, but it must not")
		return idem.Response{}, errors.New("fn must not run")
	}
}

// TargetsWithSettings lists every database the tests can reach, as Targets
// does, and each server of the MySQL family a second time with the driver
// settings that change what the server is sent and what RowsAffected
// counts: they must not change any outcome.
func TargetsWithSettings() []Target {
	var ts []Target
	for _, tg := range Targets() {
		ts = append(ts, tg)
		if tg.Family == "mysql" {
			ts = append(ts, withDriverSettings(tg))
		}
	}
	return ts
}

// withDriverSettings is tg with the settings of TargetsWithSettings, and
// named for them.
func withDriverSettings(tg Target) Target {
	settings := TargetWithParams(tg, "interpolateParams=true&clientFoundRows=true&multiStatements=true")
	settings.Name += "/interpolate+foundrows+multi"
	return settings
}

// TargetWithParams returns tg with params added to the query string of its
// go-sql-driver/mysql DSN.
func TargetWithParams(tg Target, params string) Target {
	dsn := tg.DSN
	tg.DSN = func(t testing.TB) string { return WithParams(dsn(t), params) }
	return tg
}

// ForEachTarget runs f against every one of TargetsWithSettings as a
// subtest, and shows each server it cannot reach as a skipped subtest that
// says how to reach it.
func ForEachTarget(t *testing.T, f func(t *testing.T, tg Target)) {
	t.Helper()
	ForEach(t, TargetsWithSettings(), f)
}

// ForEachWithTiDB is ForEachTarget, with TiDB in both its transaction
// modes after the other targets: for the tests that show the TiDB
// dialect's contract.
func ForEachWithTiDB(t *testing.T, f func(t *testing.T, tg Target)) {
	t.Helper()
	ForEachTarget(t, f)
	for _, tg := range TiDBTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	SkipMissingTiDB(t)
}

// ForEachVitess runs f against Vitess's vtgate, on its sharded keyspace,
// or shows it as skipped: for the tests that show the Vitess dialect's
// contract.
func ForEachVitess(t *testing.T, f func(t *testing.T, tg Target)) {
	t.Helper()
	for _, tg := range VitessTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	SkipMissingVitess(t)
}

// VitessWithSettings is the Vitess target, and the same with the driver
// settings that TargetsWithSettings adds for the MySQL family: they must
// not change any outcome through vtgate either.
func VitessWithSettings() []Target {
	var ts []Target
	for _, tg := range VitessTargets() {
		ts = append(ts, tg, withDriverSettings(tg))
	}
	return ts
}

// ForEachPooled is ForEachWithTiDB, with PostgreSQL behind PgBouncer after
// the other targets, through lib/pq and pgx: for the tests that show idem
// behind a pooler in transaction mode.
func ForEachPooled(t *testing.T, f func(t *testing.T, tg Target)) {
	t.Helper()
	ForEachWithTiDB(t, f)
	for _, tg := range PgBouncerTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	SkipMissingPgBouncer(t)
}

// ForEachCitus runs f on the Citus targets alone, or shows them skipped.
func ForEachCitus(t *testing.T, f func(t *testing.T, tg Target)) {
	t.Helper()
	for _, tg := range CitusTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	SkipMissingCitus(t)
}

// ForEachRunTarget is ForEachWithTiDB for the tests of multi-step
// requests, without TiDB's optimistic target: it wraps idem.TiDB() in a
// dialect of the tests' own, and a dialect from outside the package has no
// statements for them (ErrNoSteps, TestRunInvalid).
func ForEachRunTarget(t *testing.T, f func(t *testing.T, tg Target)) {
	t.Helper()
	ForEachWithTiDB(t, func(t *testing.T, tg Target) {
		if strings.HasSuffix(tg.Name, "/optimistic") {
			t.Skip("a wrapped dialect has no multi-step requests")
		}
		f(t, tg)
	})
}

// LeaseClock is tg whose Stores add offset() to the database's clock in
// every statement that sets or compares a lease (internal/testhook).
func LeaseClock(tg Target, offset func() time.Duration) Target {
	tg.Dialect = testhook.LeaseClock{Dialect: tg.Dialect, Offset: offset}
	return tg
}

// PurgeHeld is tg whose Stores' Purge calls held with the keys of each
// batch between its select and its delete (internal/testhook).
func PurgeHeld(tg Target, held func(keys [][]byte)) Target {
	tg.Dialect = testhook.PurgeHeld{Dialect: tg.Dialect, Held: held}
	return tg
}

// Clock is a Store's clock that a test moves forward, for idem.WithClock.
type Clock struct{ offset atomic.Int64 }

// Now is the time on c.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves c by d.
func (c *Clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Leases is tg with the database's clock, which leases run on, moved
// with c.
func (c *Clock) Leases(tg Target) Target {
	return LeaseClock(tg, func() time.Duration { return time.Duration(c.offset.Load()) })
}

// NewTable returns a new table name, with prefix, whose table is dropped at
// the end of the test if it is there.
func NewTable(t *testing.T, db *sql.DB, prefix string) string {
	t.Helper()
	table := prefix + RandomName()
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
			t.Logf("drop %s: %v", table, err)
		}
		// MySQL's claim procedures, where Migrate or the files made them.
		for _, proc := range []string{table + "_claim", table + "_claim2", table + "_claim_int64", table + "_claim_bytes"} {
			var n int
			if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM information_schema.routines WHERE routine_name = '"+proc+"'").Scan(&n); err == nil && n > 0 {
				if _, err := db.ExecContext(context.Background(), "DROP PROCEDURE "+proc); err != nil {
					t.Logf("drop %s: %v", proc, err)
				}
			}
		}
	})
	return table
}

// NewStore is a Store of d on table, with opts.
func NewStore(t *testing.T, d idem.Dialect, table string, opts ...idem.Option) *idem.Store {
	t.Helper()
	store, err := idem.New(d, append([]idem.Option{idem.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// KeyColumn is the key column, quoted for family: key is a reserved word
// in MariaDB.
func KeyColumn(family string) string {
	if family == "mysql" {
		return "`key`"
	}
	return `"key"`
}

// QuoteName quotes a table name for family.
func QuoteName(family, name string) string {
	if family == "mysql" {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// StoredKeys returns the keys of every record in e's table, on a database
// of family, expired or not, sorted.
func StoredKeys(t *testing.T, e *Env, family string) []string {
	t.Helper()
	rows, err := e.DB.Query(`SELECT ` + KeyColumn(family) + ` FROM ` + QuoteName(family, e.Table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(k))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}
