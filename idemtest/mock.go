package idemtest

import (
	"database/sql/driver"
	"fmt"
	"regexp"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/go-sql-driver/mysql"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
)

// Mock sets go-sqlmock expectations for the statements that a Store sends,
// so that code which calls Do or DoTx can be unit-tested without a database
// and without knowing idem's SQL. Statements are matched exactly: the SQL is
// taken from the Store itself (Store.Queries), so it follows every change of
// the dialect.
//
// The expectations go in the order the statements run, between the caller's
// own: for a claimed key, ExpectDo, then the expectations of fn's
// statements, then ExpectComplete.
//
//	db, mock, _ := sqlmock.New()
//	m := idemtest.NewMock(mock, store)
//	mock.ExpectBegin()
//	m.ExpectDo("order-1", hash) // claimed
//	mock.ExpectExec(`INSERT INTO orders`).WillReturnResult(sqlmock.NewResult(1, 1))
//	m.ExpectComplete("order-1", hash, resp)
//	mock.ExpectCommit()
//
// The other outcomes are one call each: m.ExpectDo(key, hash).WillReplay(resp),
// WillMismatch(), WillBeInFlight() or WillConflict(). For DoTx on a store
// made WithLookupFirst, ExpectLookupFirst comes first, before the BEGIN.
type Mock struct {
	mock    sqlmock.Sqlmock
	store   *idem.Store
	queries map[string]idem.Query
	equal   bool
}

// NewMock returns a Mock that sets expectations on mock for the statements
// of store. It assumes sqlmock's default matcher, which reads the expected
// SQL as a regular expression; call MatchEqual when mock was made with
// sqlmock.QueryMatcherEqual.
func NewMock(mock sqlmock.Sqlmock, store *idem.Store) *Mock {
	return &Mock{mock: mock, store: store, queries: store.Queries()}
}

// MatchEqual makes the Mock give its SQL as plain text, for a sqlmock made
// with sqlmock.QueryMatcherEqual, and returns the Mock.
func (m *Mock) MatchEqual() *Mock {
	m.equal = true
	return m
}

// sql returns the expected text of the named statement, for the matcher.
func (m *Mock) sql(name string) string {
	q, ok := m.queries[name]
	if !ok {
		// Never matches, and says why in sqlmock's complaint.
		return fmt.Sprintf("idemtest: the store has no %s statement", name)
	}
	if m.equal {
		return q.SQL
	}
	return "^" + regexp.QuoteMeta(q.SQL) + "$"
}

// args returns the arguments of the named statement: the values given by
// name, and sqlmock.AnyArg for the others (times and tokens).
func (m *Mock) args(name string, vals map[string]driver.Value) []driver.Value {
	q := m.queries[name]
	args := make([]driver.Value, len(q.Params))
	for i, p := range q.Params {
		if v, ok := vals[p]; ok {
			args[i] = v
		} else {
			args[i] = sqlmock.AnyArg()
		}
	}
	return args
}

// mockToken is the claim token of the records the mock's statements return.
// The token that Do binds is random, and matched with sqlmock.AnyArg.
const mockToken = int64(1)

// claimColumns are the columns of the claim statement, and recordColumns
// those of the lookup.
var (
	claimColumns  = []string{"claimed", "busy", "request_hash", "status", "header", "body", "checksum", "created_at", "expires_at", "token"}
	recordColumns = claimColumns[2:]
)

// ExpectDo expects Do (or DoTx) to claim key for a request with reqHash. By
// default the claim wins: expect fn's statements next, then ExpectComplete.
// Call one of the methods of the result to expect another outcome.
func (m *Mock) ExpectDo(key string, reqHash []byte) *ExpectedDo {
	e := &ExpectedDo{m: m, key: []byte(key), hash: reqHash}
	e.claim = m.mock.ExpectQuery(m.sql("claim")).
		WithArgs(m.args("claim", map[string]driver.Value{"key": e.key, "request_hash": reqHash})...)
	now := time.Now()
	e.claim.WillReturnRows(sqlmock.NewRows(claimColumns).
		AddRow(true, false, reqHash, nil, nil, nil, nil, now.UnixMicro(), now.Add(idem.DefaultRetention).UnixMicro(), mockToken))
	return e
}

// ExpectComplete expects Do to store resp as the response of the key that
// it claimed for reqHash.
func (m *Mock) ExpectComplete(key string, reqHash []byte, resp idem.Response) {
	header := codec.EncodeHeader(resp.Header)
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	sum := codec.Checksum([]byte(key), reqHash, int64(resp.Status), header, body)
	m.mock.ExpectExec(m.sql("complete")).
		WithArgs(m.args("complete", map[string]driver.Value{
			"key": []byte(key), "status": int64(resp.Status), "header": header, "body": body, "checksum": sum[:],
		})...).
		WillReturnResult(sqlmock.NewResult(0, 1))
}

// ExpectAbandon expects Do to delete its claim of key, as it does when fn
// fails or its response is too large to store.
func (m *Mock) ExpectAbandon(key string) {
	m.mock.ExpectExec(m.sql("abandon")).
		WithArgs(m.args("abandon", map[string]driver.Value{"key": []byte(key)})...).
		WillReturnResult(sqlmock.NewResult(0, 1))
}

// ExpectLookupFirst expects the read with which DoTx begins on a store made
// WithLookupFirst, before its transaction. By default the read finds
// nothing and DoTx goes on: expect the BEGIN and ExpectDo next. WillReplay
// and WillMismatch make it find a finished request instead, which answers
// DoTx with no transaction after it.
func (m *Mock) ExpectLookupFirst(key string, reqHash []byte) *ExpectedLookup {
	e := &ExpectedLookup{key: []byte(key), hash: reqHash}
	e.lookup = m.expectLookup(e.key, nil)
	return e
}

// ExpectedLookup is the expectation of the read that ExpectLookupFirst made.
type ExpectedLookup struct {
	key, hash []byte
	lookup    *sqlmock.ExpectedQuery
}

// WillReplay makes the read find a finished request with the same hash and
// the stored response resp: DoTx answers Replay with resp.
func (e *ExpectedLookup) WillReplay(resp idem.Response) {
	e.lookup.WillReturnRows(sqlmock.NewRows(recordColumns).AddRow(liveRecord(e.key, e.hash, &resp)...))
}

// WillMismatch makes the read find a finished request with another hash:
// DoTx answers Mismatch.
func (e *ExpectedLookup) WillMismatch() {
	other := append([]byte("not "), e.hash...)
	e.lookup.WillReturnRows(sqlmock.NewRows(recordColumns).AddRow(liveRecord(e.key, other, &idem.Response{Status: 200})...))
}

// ExpectedDo is the expectation of one claim, which ExpectDo made.
type ExpectedDo struct {
	m         *Mock
	key, hash []byte
	claim     *sqlmock.ExpectedQuery
}

// WillReplay makes the claim find a finished request with the same hash and
// the stored response resp: Do answers Replay with resp.
func (e *ExpectedDo) WillReplay(resp idem.Response) {
	e.found(e.hash, &resp)
}

// WillMismatch makes the claim find a finished request with another hash: Do
// answers Mismatch.
func (e *ExpectedDo) WillMismatch() {
	other := append([]byte("not "), e.hash...)
	e.found(other, &idem.Response{Status: 200})
}

// WillBeInFlight makes the claim find the key held by a request that has not
// finished: Do answers InFlight.
func (e *ExpectedDo) WillBeInFlight() {
	if e.m.store.Dialect().Name() == "mysql" {
		// MariaDB's claim waits for the holder, times out, and looks.
		e.claim.WillReturnError(&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"})
		e.m.expectLookup(e.key, nil)
		return
	}
	e.found(e.hash, nil)
}

// WillConflict makes the claim fail with the dialect's retryable conflict (a
// serialization failure, a deadlock, a busy database): Do returns an error
// that matches idem.ErrRetry. Expect the caller's rollback next.
func (e *ExpectedDo) WillConflict() {
	e.claim.WillReturnError(conflictError(e.m.store.Dialect().Name()))
}

// WillReturnError makes the claim fail with err, as a broken connection would.
func (e *ExpectedDo) WillReturnError(err error) {
	e.claim.WillReturnError(err)
}

// liveRecord returns the columns of a live record of key with hash and,
// unless resp is nil, a stored response, as the lookup statement reads them.
func liveRecord(key, hash []byte, resp *idem.Response) []driver.Value {
	now := time.Now()
	rec := []driver.Value{hash, nil, nil, nil, nil, now.Add(-time.Second).UnixMicro(), now.Add(idem.DefaultRetention).UnixMicro(), mockToken}
	if resp != nil {
		header := codec.EncodeHeader(resp.Header)
		body := resp.Body
		if body == nil {
			body = []byte{}
		}
		sum := codec.Checksum(key, hash, int64(resp.Status), header, body)
		rec[1], rec[2], rec[3], rec[4] = int64(resp.Status), header, body, sum[:]
	}
	return rec
}

// found makes the claim lose to a live record with hash and, unless resp is
// nil, a stored response. SQLite's claim returns nothing when it loses, so
// Do looks the record up in a second statement; the other dialects' claims
// return the record.
func (e *ExpectedDo) found(hash []byte, resp *idem.Response) {
	rec := liveRecord(e.key, hash, resp)
	if e.m.store.Dialect().Name() == "sqlite" {
		e.claim.WillReturnRows(sqlmock.NewRows(claimColumns))
		e.m.expectLookup(e.key, rec)
		return
	}
	e.claim.WillReturnRows(sqlmock.NewRows(claimColumns).AddRow(append([]driver.Value{false, false}, rec...)...))
}

// expectLookup expects the lookup statement for key, as Do sends it after a
// claim that did not return the record and DoTx before its transaction,
// returning rec, or no row.
func (m *Mock) expectLookup(key []byte, rec []driver.Value) *sqlmock.ExpectedQuery {
	rows := sqlmock.NewRows(recordColumns)
	if rec != nil {
		rows.AddRow(rec...)
	}
	return m.mock.ExpectQuery(m.sql("lookup")).
		WithArgs(m.args("lookup", map[string]driver.Value{"key": key})...).
		WillReturnRows(rows)
}

// conflictError is an error that the named built-in dialect classifies as a
// retryable conflict.
func conflictError(dialect string) error {
	switch dialect {
	case "postgres":
		return sqlStateError("40001")
	case "mysql":
		return &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	default:
		return sqliteBusy{}
	}
}

// sqlStateError is a PostgreSQL error as lib/pq and pgx report one, through
// SQLState.
type sqlStateError string

func (e sqlStateError) Error() string {
	return "SQLSTATE " + string(e) + ": could not serialize access"
}
func (e sqlStateError) SQLState() string { return string(e) }

// sqliteBusy is SQLITE_BUSY as modernc.org/sqlite reports it, through Code.
type sqliteBusy struct{}

func (sqliteBusy) Error() string { return "database is locked (5) (SQLITE_BUSY)" }
func (sqliteBusy) Code() int     { return 5 }
