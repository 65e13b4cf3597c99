package idemtest

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemhttp"
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
// WillMismatch(), WillBeInFlight(), WillConflict() or WillReturnError(err).
// For DoTx on a store of idem.LookupAlways, ExpectLookupFirst comes first,
// before the BEGIN.
//
// Which statements DoTx sends depends on the store's idem.LookupPolicy,
// whose doc gives the rule of the default, idem.LookupAdaptive: after a
// number of calls, it may read the key before the BEGIN, depending on the
// calls before. A test that runs many DoTx calls through one store,
// directly or through the idemhttp middleware, fixes the policy with
// idem.WithLookupFirst: idem.LookupNever for the expectations of ExpectDo
// alone, idem.LookupAlways for ExpectLookupFirst before each BEGIN.
//
// For a handler behind the idemhttp middleware, ExpectRequest takes the
// place of ExpectDo: it expects the claim that the middleware makes for a
// request, with the key and hash the middleware computes, and
// ExpectCompleteAny that of the response it stores, whatever the handler
// answered:
//
//	mw, _ := idemhttp.New(store, db, nil, idemhttp.WithSingleClient())
//	mock.ExpectBegin()
//	claim, err := m.ExpectRequest(mw, req)
//	mock.ExpectExec(`INSERT INTO orders`).WillReturnResult(sqlmock.NewResult(1, 1))
//	m.ExpectCompleteAny(claim.Key())
//	mock.ExpectCommit()
//	mw.Handler(http.HandlerFunc(createOrder)).ServeHTTP(rec, req)
//
// A Mock knows nothing of any dialect by name: it works the same for the
// built-in dialects and for one written outside package idem. Which
// statements a claim takes it reads from Store.Queries (see ExpectDo); which
// error is a conflict it asks the Store's dialect (see
// ExpectedDo.WillConflict).
type Mock struct {
	mock    sqlmock.Sqlmock
	store   *idem.Store
	queries map[string]idem.StatementText
	equal   bool
	// incarnations says that the store's records have an incarnation,
	// which its claim writes and its statements return (see
	// dialect.Statements).
	incarnations bool
}

// NewMock returns a Mock that sets expectations on mock for the statements
// of store. It assumes sqlmock's default matcher, which reads the expected
// SQL as a regular expression; call MatchEqual when mock was made with
// sqlmock.QueryMatcherEqual.
func NewMock(mock sqlmock.Sqlmock, store *idem.Store) *Mock {
	m := &Mock{mock: mock, store: store, queries: store.Queries()}
	m.incarnations = slices.Contains(m.queries["Claim"].Params, "incarnation") || slices.Contains(m.queries["ClaimWrite"].Params, "incarnation")
	return m
}

// MatchEqual makes the Mock give its SQL as plain text, for a sqlmock made
// with sqlmock.QueryMatcherEqual, and returns the Mock.
func (m *Mock) MatchEqual() *Mock {
	m.equal = true
	return m
}

// has reports whether the store sends the named statement.
func (m *Mock) has(name string) bool {
	_, ok := m.queries[name]
	return ok
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
// name, and sqlmock.AnyArg for the others (times, tokens and lock numbers).
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

// mockToken and mockIncarnation are the claim token and the incarnation of
// the records the mock's statements return. Those that Do binds are
// random, and matched with sqlmock.AnyArg.
const (
	mockToken       = int64(1)
	mockIncarnation = int64(4711)
)

// claimColumns are the columns of the claim statement; the lookup returns
// the record columns, which follow claimed and busy.
var claimColumns = []string{"claimed", "busy", "request_hash", "status", "header", "body", "checksum", "created_at", "expires_at", "token", "incarnation"}

// rows returns the rows of the claim statement, or, with record, of the
// lookup, each of which is a row of all of claimColumns or of the record
// columns: without the last, the incarnation, where the store's records
// have none.
func (m *Mock) rows(record bool, rows ...[]driver.Value) *sqlmock.Rows {
	cols := claimColumns
	if record {
		cols = cols[2:]
	}
	if !m.incarnations {
		cols = cols[:len(cols)-1]
	}
	r := sqlmock.NewRows(cols)
	for _, row := range rows {
		r.AddRow(row[:len(cols)]...)
	}
	return r
}

// ExpectDo expects Do (or DoTx) to claim key for a request with reqHash. By
// default the claim wins: expect fn's statements next, then ExpectComplete
// (or ExpectAbandon, when fn fails). Call one of the methods of the result,
// at once, to expect another outcome.
//
// It expects the statements of the claim that the store sends, in the order
// it sends them, each only where the store's dialect has it (see
// dialect.Statements and Store.Queries):
//
//   - "ClaimWrite", which succeeds, affecting one row;
//   - "Claim", which answers the outcome.
//
// The records that the claim returns are stamped with time.Now() and expire
// idem.DefaultRetention later: a Store WithClock whose clock runs that far
// ahead of the real one sees them expired.
//
// For DoTx, ExpectDo (after the BEGIN) is all there is on a store of
// idem.LookupNever, and on a store of idem.LookupAdaptive until that
// policy starts reading first (see idem.LookupPolicy), which these
// expectations do not foresee: a test that runs many calls through one
// store fixes the policy, idem.LookupNever, or idem.LookupAlways with
// ExpectLookupFirst before each BEGIN.
func (m *Mock) ExpectDo(key string, reqHash []byte) *ExpectedDo {
	e := &ExpectedDo{m: m, key: []byte(key), hash: reqHash}
	vals := map[string]driver.Value{"key": e.key, "request_hash": reqHash}
	if m.has("ClaimWrite") {
		m.mock.ExpectExec(m.sql("ClaimWrite")).
			WithArgs(m.args("ClaimWrite", vals)...).
			WillReturnResult(sqlmock.NewResult(0, 1))
	}
	e.claim = m.mock.ExpectQuery(m.sql("Claim")).WithArgs(m.args("Claim", vals)...)
	now := time.Now()
	e.claim.WillReturnRows(m.rows(false,
		[]driver.Value{true, false, reqHash, nil, nil, nil, nil, now.UnixMicro(), now.Add(idem.DefaultRetention).UnixMicro(), mockToken, mockIncarnation}))
	return e
}

// ExpectComplete expects Do to store resp as the response of the key that
// it claimed for reqHash, affecting one row.
func (m *Mock) ExpectComplete(key string, reqHash []byte, resp idem.Response) {
	header := codec.EncodeHeader(resp.Header)
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	sum := codec.Checksum([]byte(key), reqHash, int64(resp.Status), header, body)
	m.mock.ExpectExec(m.sql("Complete")).
		WithArgs(m.args("Complete", map[string]driver.Value{
			"key": []byte(key), "status": int64(resp.Status), "header": header, "body": body, "checksum": sum[:],
		})...).
		WillReturnResult(sqlmock.NewResult(0, 1))
}

// ExpectCompleteAny expects Do to store a response of the key that it
// claimed, whatever the response, affecting one row. It is ExpectComplete
// for a response the test cannot or need not predict byte for byte, such as
// the one the idemhttp middleware stores: the handler's status, its body,
// and only the headers on the middleware's allow-list, with a Content-Type
// sniffed where the handler set none. Check what the client got instead,
// from the ResponseWriter the middleware was served with: the status and
// body it stores are those it sends.
func (m *Mock) ExpectCompleteAny(key string) {
	m.mock.ExpectExec(m.sql("Complete")).
		WithArgs(m.args("Complete", map[string]driver.Value{"key": []byte(key)})...).
		WillReturnResult(sqlmock.NewResult(0, 1))
}

// ExpectRequest expects the claim that the idemhttp middleware mw makes for
// the request r, as ExpectDo does for a key and hash: the stored key and the
// request hash are those that mw.Identify returns for r, which are the
// middleware's own by construction, so the test repeats neither the scope's
// place in the key nor the hash's formula. Call it after the BEGIN, and then
// expect the handler's statements, then the completion (ExpectCompleteAny
// with the result's Key), then the COMMIT; or call a Will method of the
// result at once for another outcome, followed by the ROLLBACK. When the
// handler answers with a status the middleware does not store (5xx by
// default), nothing is stored: expect the ROLLBACK after the handler's
// statements, which undoes the claim.
//
// Identify reads r's body and puts it back, and calls the middleware's
// scope function with r, so r is the request to serve afterwards. Its error
// (a method the middleware does not protect, a missing or malformed key, a
// failed scope, a body over the limit) is returned, and nothing is
// expected: the middleware would claim no key for r. For a Store of
// idem.LookupAlways, expect its read before the BEGIN with
// ExpectLookupFirst and the key and hash of mw.Identify(r). A Store of the
// default policy may start reading first, as ExpectDo says: a test that
// serves many requests through one Store fixes the policy with
// idem.WithLookupFirst.
func (m *Mock) ExpectRequest(mw *idemhttp.Middleware, r *http.Request) (*ExpectedDo, error) {
	key, hash, err := mw.Identify(r)
	if err != nil {
		return nil, fmt.Errorf("idemtest: ExpectRequest: %w", err)
	}
	return m.ExpectDo(key, hash), nil
}

// ExpectAbandon expects Do to delete its claim of key, affecting one row, as
// it does in the caller's transaction when fn fails or returns a response it
// cannot store (too large, or a status beyond 32 bits), so that a caller who
// commits anyway stores nothing. Do sends no such statement when fn's error
// is a conflict (it matches idem.ErrRetry, or the dialect classifies it as
// dialect.ErrorRetry): the transaction is lost then, so expect only the
// caller's rollback after fn's statements. DoTx, which ends its own
// transaction, never sends it: expect its ROLLBACK after fn's statements.
func (m *Mock) ExpectAbandon(key string) {
	m.mock.ExpectExec(m.sql("Abandon")).
		WithArgs(m.args("Abandon", map[string]driver.Value{"key": []byte(key)})...).
		WillReturnResult(sqlmock.NewResult(0, 1))
}

// ExpectLookupFirst expects the read with which DoTx begins on a store of
// idem.LookupAlways, before its transaction. By default the read finds
// nothing and DoTx goes on: expect the BEGIN and ExpectDo next. WillReplay
// and WillMismatch make it find a finished request instead, which answers
// DoTx with no transaction after it. The records it returns are stamped as
// those of ExpectDo.
//
// A store of idem.LookupAdaptive sends this read too, as idem.LookupPolicy
// says, so whether a call sends it depends on the calls before. Expect it
// on a store of idem.LookupAlways, where every DoTx sends it; a test that
// runs many DoTx calls through a store of the default policy should fix
// the policy with idem.WithLookupFirst rather than predict the switch.
// Store.LooksUpFirst tells what the next call will do.
//
// Under every policy, DoTx sends the same read after its transaction when
// that answered InFlight, or failed with ErrRetry after its last attempt:
// expect it after that ROLLBACK with ExpectLookupFirst, where WillReplay
// and WillMismatch make it answer DoTx; left unexpected, the read fails in
// sqlmock, and DoTx keeps the transaction's answer.
//
// Where the store's dialect says that a session may read uncommitted rows
// (dialect.Capabilities.ReadsUncommitted: MySQL, MariaDB), the read runs in
// a read-only transaction of its own, whose BEGIN and ROLLBACK this
// expects around it.
func (m *Mock) ExpectLookupFirst(key string, reqHash []byte) *ExpectedLookup {
	e := &ExpectedLookup{m: m, key: []byte(key), hash: reqHash}
	own := dialect.CapabilitiesOf(m.store.Dialect()).ReadsUncommitted
	if own {
		m.mock.ExpectBegin()
	}
	e.lookup = m.expectLookup(e.key, nil)
	if own {
		m.mock.ExpectRollback()
	}
	return e
}

// ExpectedLookup is the expectation of the read that ExpectLookupFirst made.
type ExpectedLookup struct {
	m         *Mock
	key, hash []byte
	lookup    *sqlmock.ExpectedQuery
}

// WillReplay makes the read find a finished request with the same hash and
// the stored response resp: DoTx answers Replay with resp.
func (e *ExpectedLookup) WillReplay(resp idem.Response) {
	e.lookup.WillReturnRows(e.m.rows(true, liveRecord(e.key, e.hash, &resp)))
}

// WillMismatch makes the read find a finished request with another hash:
// DoTx answers Mismatch.
func (e *ExpectedLookup) WillMismatch() {
	e.lookup.WillReturnRows(e.m.rows(true, liveRecord(e.key, otherHash(e.hash), &idem.Response{Status: 200})))
}

// ExpectedDo is the expectation of one claim, which ExpectDo made.
//
// The outcomes other than Claimed all come from the claim statement itself,
// the same way for every dialect: WillReplay, WillMismatch and
// WillBeInFlight make it return the record of the request that holds the
// key (claimed false, busy false), and WillConflict and WillReturnError
// make it fail. Do then sends no lookup. The claim of some databases never
// returns the record it lost to (PostgreSQL's and SQLite's return no row,
// and Do reads the record in a statement of its own, the dialect's
// ClaimLost or Lookup, and on PostgreSQL asks whether the key is held in
// one more, ClaimHeld, when that found no live record; MySQL's returns no
// row when it claimed), but a Store
// accepts both answers from any dialect, and this one changes only the
// expectation of the claim, which ExpectDo has set already: sqlmock matches
// expectations in the order they were set, ahead of those of fn's
// statements.
type ExpectedDo struct {
	m         *Mock
	key, hash []byte
	claim     *sqlmock.ExpectedQuery
}

// Key returns the key of the claim: the key given to ExpectDo, or the
// stored key of ExpectRequest's request, for the expectations that follow
// the claim, ExpectCompleteAny and ExpectAbandon.
func (e *ExpectedDo) Key() string { return string(e.key) }

// WillReplay makes the claim find a finished request with the same hash and
// the stored response resp: Do answers Replay with resp.
func (e *ExpectedDo) WillReplay(resp idem.Response) {
	e.lost(e.hash, &resp)
}

// WillMismatch makes the claim find a finished request with another hash: Do
// answers Mismatch.
func (e *ExpectedDo) WillMismatch() {
	e.lost(otherHash(e.hash), &idem.Response{Status: 200})
}

// WillBeInFlight makes the claim find the key held by a request with the
// same hash that has not finished: Do answers InFlight.
func (e *ExpectedDo) WillBeInFlight() {
	e.lost(e.hash, nil)
}

// WillConflict makes the claim fail with a retryable conflict (a
// serialization failure, a deadlock, a busy database): Do returns an error
// that matches idem.ErrRetry and wraps the conflict error. Expect the
// caller's rollback next; DoTx then runs its transaction again, so expect
// its next attempt after the rollback.
//
// The error is the first of idemtest's conflict errors that the Store's
// dialect classifies as dialect.ErrorRetry: a PostgreSQL serialization failure
// (SQLSTATE 40001, reported through a SQLState method as lib/pq and pgx
// do), a MySQL deadlock (error 1213, reported through a method
// MySQLErrorNumber, which the MySQL family reads as it reads
// go-sql-driver/mysql's errors), or SQLITE_BUSY (code 5,
// reported through a Code method as modernc.org/sqlite does). A dialect
// whose driver reports its errors otherwise (such as
// github.com/mattn/go-sqlite3, a driver idemtest does not import)
// classifies none of them as a retry. Then the claim fails instead with an
// error that matches ErrNoConflict and says so, and Do returns it as it
// would any other error of the claim, not as idem.ErrRetry; use
// WillReturnError with the driver's own conflict error.
func (e *ExpectedDo) WillConflict() {
	e.claim.WillReturnError(conflictError(e.m.store.Dialect()))
}

// WillReturnError makes the claim fail with err, as a broken connection
// would. Do returns it wrapped, as idem.ErrRetry when the dialect
// classifies it as dialect.ErrorRetry. The error comes from the claim
// statement, after ClaimWrite succeeded, where the dialect has it.
//
// An err that the dialect classifies as dialect.ErrorLockTimeout makes Do
// answer InFlight, as a held key does; WillBeInFlight says so more plainly.
func (e *ExpectedDo) WillReturnError(err error) {
	e.claim.WillReturnError(err)
}

// lost makes the claim lose to a live record with hash and, unless resp is
// nil, a stored response, which the claim statement returns.
func (e *ExpectedDo) lost(hash []byte, resp *idem.Response) {
	rec := liveRecord(e.key, hash, resp)
	e.claim.WillReturnRows(e.m.rows(false, append([]driver.Value{false, false}, rec...)))
}

// otherHash returns a request hash different from hash.
func otherHash(hash []byte) []byte {
	return append([]byte("not "), hash...)
}

// liveRecord returns the columns of a live record of key with hash and,
// unless resp is nil, a stored response, as the lookup statement reads them.
func liveRecord(key, hash []byte, resp *idem.Response) []driver.Value {
	now := time.Now()
	rec := []driver.Value{hash, nil, nil, nil, nil, now.Add(-time.Second).UnixMicro(), now.Add(idem.DefaultRetention).UnixMicro(), mockToken, mockIncarnation}
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

// expectLookup expects the lookup statement for key, returning rec, or no
// row.
func (m *Mock) expectLookup(key []byte, rec []driver.Value) *sqlmock.ExpectedQuery {
	var rows [][]driver.Value
	if rec != nil {
		rows = append(rows, rec)
	}
	return m.mock.ExpectQuery(m.sql("Lookup")).
		WithArgs(m.args("Lookup", map[string]driver.Value{"key": key})...).
		WillReturnRows(m.rows(true, rows...))
}

// ErrNoConflict is the error that ExpectedDo.WillConflict makes the claim
// return when the Store's dialect classifies none of idemtest's conflict
// errors as dialect.ErrorRetry.
var ErrNoConflict = errors.New("idemtest: WillConflict: the dialect classifies none of idemtest's conflict errors (SQLSTATE 40001, MySQL 1213, SQLITE_BUSY) as a retry; use WillReturnError with the driver's own conflict error")

// conflictErrors returns idemtest's candidate conflict errors, as the
// drivers of the built-in dialects report them.
func conflictErrors() []error {
	return []error{
		sqlStateError("40001"),
		mysqlDeadlock{},
		sqliteBusy{},
	}
}

// conflictError returns the first of conflictErrors that d classifies as
// dialect.ErrorRetry, or an error that matches ErrNoConflict.
func conflictError(d idem.Dialect) error {
	for _, err := range conflictErrors() {
		if d.Classify(err) == dialect.ErrorRetry {
			return err
		}
	}
	return fmt.Errorf("%w (dialect %T)", ErrNoConflict, d)
}

// sqlStateError is a PostgreSQL error as lib/pq and pgx report one, through
// SQLState.
type sqlStateError string

func (e sqlStateError) Error() string {
	return "SQLSTATE " + string(e) + ": could not serialize access"
}
func (e sqlStateError) SQLState() string { return string(e) }

// mysqlDeadlock is MySQL's error 1213. It is idemtest's own rather than the
// driver's *mysql.MySQLError, so that idemtest imports no driver: the MySQL
// family classifies it by its MySQLErrorNumber method.
type mysqlDeadlock struct{}

func (mysqlDeadlock) Error() string {
	return "Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"
}
func (mysqlDeadlock) MySQLErrorNumber() uint16 { return 1213 }

// sqliteBusy is SQLITE_BUSY as modernc.org/sqlite reports it, through Code.
type sqliteBusy struct{}

func (sqliteBusy) Error() string { return "database is locked (5) (SQLITE_BUSY)" }
func (sqliteBusy) Code() int     { return 5 }
