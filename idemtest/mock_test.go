package idemtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemtest"
)

var (
	hash = idem.Fingerprint([]byte("POST /orders"), []byte(`{"item":88}`))
	resp = idem.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/1"}}, Body: []byte(`{"order":1}`)}
)

const insertSQL = "INSERT INTO orders (item) VALUES (88)"

// insertOrder is the Func of the tests: one INSERT and a response.
func insertOrder(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
	if _, err := tx.ExecContext(ctx, insertSQL); err != nil {
		return idem.Response{}, err
	}
	return resp, nil
}

// tiny is a dialect of the kind written outside package idem, for an
// imaginary database whose driver reports errors as *tinyError: the Mock
// must treat it as it treats the built-in dialects, by its statements and
// its Classify alone.
type tiny struct {
	// split claims as the TiDB dialect does: ClaimWrite then a read.
	split bool
	// sqlState makes Classify also read SQLSTATE 40001 as a conflict,
	// as a dialect for a PostgreSQL-compatible database would.
	sqlState bool
}

// tinyError is the imaginary driver's error, which idemtest cannot build.
type tinyError struct{ code string }

func (e *tinyError) Error() string { return "tiny: " + e.code }

func (tiny) Name() string             { return "tiny" }
func (tiny) Placeholder(n int) string { return dialect.NumberedPlaceholder("?", n) }
func (tiny) Schema(table string) []string {
	return []string{"CREATE TABLE " + dialect.QuoteTable(table, '"') + " (key BLOB PRIMARY KEY)"}
}
func (tiny) Upgrades(string) []dialect.Upgrade { return nil }

func (d tiny) Statements(table string, lockTimeout time.Duration) dialect.Statements {
	t := dialect.QuoteTable(table, '"')
	const record = "request_hash, status, header, body, checksum, created_at, expires_at, token"
	insert := "INSERT INTO " + t + " (key, request_hash, created_at, expires_at, token) VALUES ({key}, {request_hash}, {created_at}, {expires_at}, {token}) ON CONFLICT (key) DO NOTHING"
	st := dialect.Statements{
		Claim:    insert + " RETURNING 1, 0, " + record,
		Takeover: "UPDATE " + t + " SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at}, token = {token}, status = NULL WHERE key = {key} AND expires_at <= {created_at}",
		Lookup:   "SELECT " + record + " FROM " + t + " WHERE key = {key}",
		Complete: "UPDATE " + t + " SET status = {status}, header = {header}, body = {body}, checksum = {checksum} WHERE key = {key} AND token = {token}",
		Abandon:  "DELETE FROM " + t + " WHERE key = {key} AND token = {token}",
		Purge:    "DELETE FROM " + t + " WHERE expires_at <= {now} LIMIT {limit}",
	}
	if d.split {
		st.ClaimWrite = insert
		st.Claim = "SELECT token = {token}, 0, " + record + " FROM " + t + " WHERE key = {key} FOR UPDATE"
	}
	return st
}

func (d tiny) Classify(err error) dialect.ErrorKind {
	var te *tinyError
	if errors.As(err, &te) && te.code == "conflict" {
		return dialect.ErrorRetry
	}
	var se interface{ SQLState() string }
	if d.sqlState && errors.As(err, &se) && se.SQLState() == "40001" {
		return dialect.ErrorRetry
	}
	return dialect.ErrorOther
}

// dialectCase is a dialect under test, and what the Mock must do for it.
type dialectCase struct {
	name string
	d    idem.Dialect
	// claim names the statements of a claim, in the order Do sends them.
	claim []string
	// conflict tells whether WillConflict fails the claim with an error
	// that the dialect classifies as a retry, and isConflict recognises
	// that error.
	conflict   bool
	isConflict func(error) bool
	// own is the driver's own conflict error, which idemtest cannot build,
	// for WillReturnError; nil for the built-in dialects.
	own error
}

func dialectCases() []dialectCase {
	sqlState := func(err error) bool {
		var e interface{ SQLState() string }
		return errors.As(err, &e) && e.SQLState() == "40001"
	}
	mysqlDeadlock := func(err error) bool {
		var e interface{ MySQLErrorNumber() uint16 }
		return errors.As(err, &e) && e.MySQLErrorNumber() == 1213
	}
	sqliteBusy := func(err error) bool {
		var e interface{ Code() int }
		return errors.As(err, &e) && e.Code() == 5
	}
	split := []string{"ClaimWrite", "Claim"}
	return []dialectCase{
		{name: "postgres", d: idem.Postgres(), claim: []string{"Claim"}, conflict: true, isConflict: sqlState},
		{name: "mysql", d: idem.MySQL(), claim: []string{"Claim"}, conflict: true, isConflict: mysqlDeadlock},
		{name: "tidb", d: idem.TiDB(), claim: split, conflict: true, isConflict: mysqlDeadlock},
		{name: "mariadb", d: idem.MariaDB(), claim: []string{"Claim"}, conflict: true, isConflict: mysqlDeadlock},
		{name: "sqlite", d: idem.SQLite(), claim: []string{"Claim"}, conflict: true, isConflict: sqliteBusy},
		{name: "third-party", d: tiny{}, claim: []string{"Claim"}, own: &tinyError{"conflict"}},
		{name: "third-party/split", d: tiny{split: true}, claim: split, own: &tinyError{"conflict"}},
		{name: "third-party/sqlstate", d: tiny{sqlState: true}, claim: []string{"Claim"}, conflict: true, isConflict: sqlState, own: &tinyError{"conflict"}},
	}
}

// recorder is a sqlmock matcher that notes the name of each statement of
// the store that matched, "other" for the caller's own.
type recorder struct {
	mu    sync.Mutex
	base  sqlmock.QueryMatcher
	names map[string]string
	seen  []string
}

func (r *recorder) Match(expected, actual string) error {
	if err := r.base.Match(expected, actual); err != nil {
		return err
	}
	n, ok := r.names[actual]
	if !ok {
		n = "other"
	}
	r.mu.Lock()
	r.seen = append(r.seen, n)
	r.mu.Unlock()
	return nil
}

// mocked is one sqlmock database with a Mock of a store.
type mocked struct {
	db    *sql.DB
	mock  sqlmock.Sqlmock
	m     *idemtest.Mock
	rec   *recorder
	store *idem.Store
	// insert is the expected SQL of insertOrder, for the matcher.
	insert string
}

// newMocked returns a sqlmock database for store, with a Mock that gives
// its SQL as plain text when equal is set, as a regular expression
// otherwise.
func newMocked(t *testing.T, store *idem.Store, equal bool) *mocked {
	t.Helper()
	rec := &recorder{base: sqlmock.QueryMatcherRegexp, names: map[string]string{}}
	insert := regexp.QuoteMeta(insertSQL)
	if equal {
		rec.base, insert = sqlmock.QueryMatcherEqual, insertSQL
	}
	for name, q := range store.Queries() {
		rec.names[q.SQL] = name
	}
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := idemtest.NewMock(mock, store)
	if equal {
		m.MatchEqual()
	}
	return &mocked{db: db, mock: mock, m: m, rec: rec, store: store, insert: insert}
}

// do calls Do in a transaction of the database and ends it as a caller
// would: a commit when the key was claimed, a rollback otherwise.
func (x *mocked) do(t *testing.T, key string, fn idem.Func) (idem.Result, error) {
	t.Helper()
	tx, err := x.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.store.Do(context.Background(), tx, key, hash, fn)
	if err == nil && res.Outcome == idem.Claimed {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	return res, err
}

func (x *mocked) doTx(t *testing.T, key string, fn idem.Func) (idem.Result, error) {
	t.Helper()
	return x.store.DoTx(context.Background(), x.db, nil, key, hash, fn)
}

// statements returns the names of the statements matched so far.
func (x *mocked) statements() []string {
	x.rec.mu.Lock()
	defer x.rec.mu.Unlock()
	return append([]string(nil), x.rec.seen...)
}

// joined returns the statements of a, then of b, and so on.
func joined(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// errBroken is an error of no particular kind, such as a broken connection.
var errBroken = errors.New("connection reset by peer")

// TestMockAPI runs every expectation of Mock against every dialect, the
// built-in ones and dialects written outside package idem, and checks what
// Do answers, the statements it sent, in order, and that every
// expectation was met.
func TestMockAPI(t *testing.T) {
	type env struct {
		dc dialectCase
		x  *mocked
	}
	for _, c := range []struct {
		name string
		opts []idem.Option
		// expect sets the expectations, call runs Do or DoTx, and check
		// looks at the answer. statements are those Do must send, by
		// name; nil skips the check.
		expect     func(e env)
		call       func(t *testing.T, e env) (idem.Result, error)
		check      func(t *testing.T, e env, res idem.Result, err error)
		statements func(e env) []string
		only       func(dc dialectCase) bool
	}{
		{
			name: "ExpectDo claims",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash)
				e.x.mock.ExpectExec(e.x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
				e.x.m.ExpectComplete("order-1", hash, resp)
				e.x.mock.ExpectCommit()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Claimed)
				wantResponse(t, res, resp)
			},
			statements: func(e env) []string { return joined(e.dc.claim, []string{"other", "Complete"}) },
		},
		{
			name: "ExpectComplete stores an empty response",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash)
				e.x.m.ExpectComplete("order-1", hash, idem.Response{Status: 204})
				e.x.mock.ExpectCommit()
			},
			call: func(t *testing.T, e env) (idem.Result, error) {
				return e.x.do(t, "order-1", func(context.Context, *sql.Tx) (idem.Response, error) {
					return idem.Response{Status: 204}, nil
				})
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Claimed)
				wantResponse(t, res, idem.Response{Status: 204})
			},
			statements: func(e env) []string { return joined(e.dc.claim, []string{"Complete"}) },
		},
		{
			name: "ExpectCompleteAny takes whatever is stored",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				claim := e.x.m.ExpectDo("order-1", hash)
				e.x.mock.ExpectExec(e.x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
				e.x.m.ExpectCompleteAny(claim.Key())
				e.x.mock.ExpectCommit()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Claimed)
				wantResponse(t, res, resp)
			},
			statements: func(e env) []string { return joined(e.dc.claim, []string{"other", "Complete"}) },
		},
		{
			name: "WillReplay",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillReplay(resp)
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Replay)
				wantResponse(t, res, resp)
				if res.CreatedAt.IsZero() || !res.ExpiresAt.After(res.CreatedAt) {
					t.Errorf("created %v, expires %v: want a live record", res.CreatedAt, res.ExpiresAt)
				}
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillReplay an empty response",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillReplay(idem.Response{Status: 204})
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Replay)
				wantResponse(t, res, idem.Response{Status: 204})
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillMismatch",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillMismatch()
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Mismatch)
				wantResponse(t, res, idem.Response{})
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillBeInFlight",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillBeInFlight()
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.InFlight)
				wantResponse(t, res, idem.Response{})
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillConflict",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillConflict()
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				switch {
				case e.dc.conflict && (!errors.Is(err, idem.ErrRetry) || !e.dc.isConflict(err)):
					t.Errorf("Do: %v, want ErrRetry with the driver's conflict error", err)
				case !e.dc.conflict && (err == nil || errors.Is(err, idem.ErrRetry) || !errors.Is(err, idemtest.ErrNoConflict)):
					t.Errorf("Do: %v, want ErrNoConflict and not ErrRetry", err)
				case !e.dc.conflict && !strings.Contains(err.Error(), "WillReturnError with the driver's own conflict error"):
					t.Errorf("Do: %v: the error does not say what to do", err)
				}
				if res.Outcome != 0 {
					t.Errorf("outcome %v with an error", res.Outcome)
				}
			},
			// The claim fails, and a split claim resets the lock wait
			// all the same.
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillReturnError",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillReturnError(errBroken)
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				if !errors.Is(err, errBroken) || errors.Is(err, idem.ErrRetry) {
					t.Errorf("Do: %v, want %v and not ErrRetry", err, errBroken)
				}
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "WillReturnError the driver's own conflict",
			only: func(dc dialectCase) bool { return dc.own != nil },
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillReturnError(e.dc.own)
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				if !errors.Is(err, idem.ErrRetry) || !errors.Is(err, e.dc.own) {
					t.Errorf("Do: %v, want ErrRetry with %v", err, e.dc.own)
				}
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "ExpectAbandon after fn fails",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash)
				e.x.mock.ExpectExec(e.x.insert).WillReturnError(errBroken)
				e.x.m.ExpectAbandon("order-1")
				e.x.mock.ExpectRollback()
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				if !errors.Is(err, errBroken) {
					t.Errorf("Do: %v, want %v", err, errBroken)
				}
			},
			statements: func(e env) []string { return joined(e.dc.claim, []string{"other", "Abandon"}) },
		},
		{
			name: "ExpectAbandon after a response Do cannot store",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash)
				e.x.m.ExpectAbandon("order-1")
				e.x.mock.ExpectRollback()
			},
			call: func(t *testing.T, e env) (idem.Result, error) {
				return e.x.do(t, "order-1", func(context.Context, *sql.Tx) (idem.Response, error) {
					return idem.Response{Status: 1 << 40}, nil
				})
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				if !errors.Is(err, idem.ErrInvalidArgument) {
					t.Errorf("Do: %v, want ErrInvalidArgument", err)
				}
			},
			statements: func(e env) []string { return joined(e.dc.claim, []string{"Abandon"}) },
		},
		{
			name: "no abandon after fn's conflict",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash)
				e.x.mock.ExpectRollback()
			},
			call: func(t *testing.T, e env) (idem.Result, error) {
				return e.x.do(t, "order-1", func(context.Context, *sql.Tx) (idem.Response, error) {
					return idem.Response{}, fmt.Errorf("lost a race: %w", idem.ErrRetry)
				})
			},
			check: func(t *testing.T, e env, res idem.Result, err error) {
				if !errors.Is(err, idem.ErrRetry) {
					t.Errorf("Do: %v, want ErrRetry", err)
				}
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "DoTx runs again after WillConflict",
			only: func(dc dialectCase) bool { return dc.conflict },
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillConflict()
				e.x.mock.ExpectRollback()
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash)
				e.x.mock.ExpectExec(e.x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
				e.x.m.ExpectComplete("order-1", hash, resp)
				e.x.mock.ExpectCommit()
			},
			call: func(t *testing.T, e env) (idem.Result, error) { return e.x.doTx(t, "order-1", insertOrder) },
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Claimed)
				wantResponse(t, res, resp)
			},
			statements: func(e env) []string { return joined(e.dc.claim, e.dc.claim, []string{"other", "Complete"}) },
		},
		{
			name: "DoTx reads after WillBeInFlight",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillBeInFlight()
				e.x.mock.ExpectRollback()
				e.x.m.ExpectLookupFirst("order-1", hash).WillReplay(resp)
			},
			call: func(t *testing.T, e env) (idem.Result, error) { return e.x.doTx(t, "order-1", insertOrder) },
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Replay)
				wantResponse(t, res, resp)
			},
			statements: func(e env) []string { return joined(e.dc.claim, []string{"Lookup"}) },
		},
		{
			name: "DoTx keeps InFlight when the read after is not expected",
			expect: func(e env) {
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash).WillBeInFlight()
				e.x.mock.ExpectRollback()
			},
			call: func(t *testing.T, e env) (idem.Result, error) { return e.x.doTx(t, "order-1", insertOrder) },
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.InFlight)
			},
			statements: func(e env) []string { return e.dc.claim },
		},
		{
			name: "ExpectLookupFirst finds nothing",
			opts: []idem.Option{idem.WithLookupFirst(idem.LookupAlways)},
			expect: func(e env) {
				e.x.m.ExpectLookupFirst("order-1", hash)
				e.x.mock.ExpectBegin()
				e.x.m.ExpectDo("order-1", hash)
				e.x.mock.ExpectExec(e.x.insert).WillReturnResult(sqlmock.NewResult(1, 1))
				e.x.m.ExpectComplete("order-1", hash, resp)
				e.x.mock.ExpectCommit()
			},
			call: func(t *testing.T, e env) (idem.Result, error) { return e.x.doTx(t, "order-1", insertOrder) },
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Claimed)
				wantResponse(t, res, resp)
			},
			statements: func(e env) []string { return joined([]string{"Lookup"}, e.dc.claim, []string{"other", "Complete"}) },
		},
		{
			name: "ExpectLookupFirst WillReplay",
			opts: []idem.Option{idem.WithLookupFirst(idem.LookupAlways)},
			expect: func(e env) {
				e.x.m.ExpectLookupFirst("order-1", hash).WillReplay(resp)
			},
			call: func(t *testing.T, e env) (idem.Result, error) { return e.x.doTx(t, "order-1", insertOrder) },
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Replay)
				wantResponse(t, res, resp)
			},
			statements: func(e env) []string { return []string{"Lookup"} },
		},
		{
			name: "ExpectLookupFirst WillMismatch",
			opts: []idem.Option{idem.WithLookupFirst(idem.LookupAlways)},
			expect: func(e env) {
				e.x.m.ExpectLookupFirst("order-1", hash).WillMismatch()
			},
			call: func(t *testing.T, e env) (idem.Result, error) { return e.x.doTx(t, "order-1", insertOrder) },
			check: func(t *testing.T, e env, res idem.Result, err error) {
				wantOutcome(t, res, err, idem.Mismatch)
				wantResponse(t, res, idem.Response{})
			},
			statements: func(e env) []string { return []string{"Lookup"} },
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, dc := range dialectCases() {
				if c.only != nil && !c.only(dc) {
					continue
				}
				t.Run(dc.name, func(t *testing.T) {
					store, err := idem.New(dc.d, c.opts...)
					if err != nil {
						t.Fatal(err)
					}
					for _, equal := range []bool{false, true} {
						e := env{dc: dc, x: newMocked(t, store, equal)}
						c.expect(e)
						call := c.call
						if call == nil {
							call = func(t *testing.T, e env) (idem.Result, error) { return e.x.do(t, "order-1", insertOrder) }
						}
						res, err := call(t, e)
						c.check(t, e, res, err)
						if want, got := c.statements(e), e.x.statements(); !reflect.DeepEqual(got, want) {
							t.Errorf("matcher equal %v: Do sent %v, want %v", equal, got, want)
						}
						if err := e.x.mock.ExpectationsWereMet(); err != nil {
							t.Errorf("matcher equal %v: %v", equal, err)
						}
					}
				})
			}
		})
	}
}

// TestMockWillAnswers shows that each Will method makes Do answer what it
// says: the outcome, and for Replay the given response, byte for byte.
func TestMockWillAnswers(t *testing.T) {
	stored := idem.Response{Status: 200, Header: http.Header{"X-Request": {"a", "b"}}, Body: []byte("stored\x00body")}
	for _, dc := range dialectCases() {
		t.Run(dc.name, func(t *testing.T) {
			store, err := idem.New(dc.d)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []struct {
				name string
				will func(e *idemtest.ExpectedDo)
				want idem.Result
				err  error
			}{
				{"WillReplay", func(e *idemtest.ExpectedDo) { e.WillReplay(stored) }, idem.Result{Outcome: idem.Replay, Response: stored}, nil},
				{"WillMismatch", func(e *idemtest.ExpectedDo) { e.WillMismatch() }, idem.Result{Outcome: idem.Mismatch}, nil},
				{"WillBeInFlight", func(e *idemtest.ExpectedDo) { e.WillBeInFlight() }, idem.Result{Outcome: idem.InFlight}, nil},
				{"WillReturnError", func(e *idemtest.ExpectedDo) { e.WillReturnError(errBroken) }, idem.Result{}, errBroken},
			} {
				x := newMocked(t, store, false)
				x.mock.ExpectBegin()
				w.will(x.m.ExpectDo("order-1", hash))
				x.mock.ExpectRollback()
				res, err := x.do(t, "order-1", insertOrder)
				if w.err != nil {
					if !errors.Is(err, w.err) {
						t.Errorf("%s: Do: %v, want %v", w.name, err, w.err)
					}
				} else if err != nil || res.Outcome != w.want.Outcome || !sameResponse(res.Response, w.want.Response) {
					t.Errorf("%s: Do = %v %+v, %v; want %v %+v", w.name, res.Outcome, res.Response, err, w.want.Outcome, w.want.Response)
				}
				if err := x.mock.ExpectationsWereMet(); err != nil {
					t.Errorf("%s: %v", w.name, err)
				}
			}
		})
	}
}

// TestMockWillConflictFailsLoudly checks the message of a WillConflict that
// the dialect classifies none of idemtest's conflict errors as a retry.
func TestMockWillConflictFailsLoudly(t *testing.T) {
	store, err := idem.New(tiny{split: true})
	if err != nil {
		t.Fatal(err)
	}
	x := newMocked(t, store, false)
	x.mock.ExpectBegin()
	x.m.ExpectDo("order-1", hash).WillConflict()
	x.mock.ExpectRollback()
	_, err = x.do(t, "order-1", insertOrder)
	if !errors.Is(err, idemtest.ErrNoConflict) || errors.Is(err, idem.ErrRetry) {
		t.Fatalf("Do: %v, want ErrNoConflict and not ErrRetry", err)
	}
	for _, want := range []string{"classifies none of idemtest's conflict errors", "as a retry", "WillReturnError with the driver's own conflict error", "idemtest_test.tiny"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Do: %q does not say %q", err, want)
		}
	}
	if err := x.mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}

func wantOutcome(t *testing.T, res idem.Result, err error, want idem.Outcome) {
	t.Helper()
	if err != nil || res.Outcome != want {
		t.Errorf("Do = %v, %v; want %v", res.Outcome, err, want)
	}
}

func wantResponse(t *testing.T, res idem.Result, want idem.Response) {
	t.Helper()
	if !sameResponse(res.Response, want) {
		t.Errorf("response %+v, want %+v", res.Response, want)
	}
}

// sameResponse compares responses as a client sees them: a nil header or
// body is an empty one.
func sameResponse(a, b idem.Response) bool {
	return a.Status == b.Status && string(a.Body) == string(b.Body) &&
		(len(a.Header) == 0 && len(b.Header) == 0 || reflect.DeepEqual(a.Header, b.Header))
}
