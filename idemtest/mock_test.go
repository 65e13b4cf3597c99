package idemtest_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"regexp"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

var (
	hash = idem.Fingerprint([]byte("POST /orders"), []byte(`{"item":88}`))
	resp = idem.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"order":1}`)}
)

func dialects() []idem.Dialect { return []idem.Dialect{idem.Postgres(), idem.MySQL(), idem.SQLite()} }

const insertSQL = "INSERT INTO orders (item) VALUES (88)"

// insertOrder is the Func of the tests: one INSERT and a response.
func insertOrder(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
	if _, err := tx.ExecContext(ctx, insertSQL); err != nil {
		return idem.Response{}, err
	}
	return resp, nil
}

// run calls Do in a transaction of db and ends it as a caller would.
func run(t *testing.T, db *sql.DB, store *idem.Store, fn idem.Func) (idem.Result, error) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Do(context.Background(), tx, "order-1", hash, fn)
	if err == nil && res.Outcome == idem.Claimed {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	return res, err
}

func TestMockOutcomes(t *testing.T) {
	for _, d := range dialects() {
		t.Run(d.Name(), func(t *testing.T) {
			store, err := idem.New(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name   string
				expect func(mock sqlmock.Sqlmock, m *idemtest.Mock, insert string)
				want   idem.Outcome
				err    error
			}{
				{"claimed", func(mock sqlmock.Sqlmock, m *idemtest.Mock, insert string) {
					mock.ExpectBegin()
					m.ExpectDo("order-1", hash)
					mock.ExpectExec(insert).WillReturnResult(sqlmock.NewResult(1, 1))
					m.ExpectComplete("order-1", hash, resp)
					mock.ExpectCommit()
				}, idem.Claimed, nil},
				{"replay", func(mock sqlmock.Sqlmock, m *idemtest.Mock, insert string) {
					mock.ExpectBegin()
					m.ExpectDo("order-1", hash).WillReplay(resp)
					mock.ExpectRollback()
				}, idem.Replay, nil},
				{"mismatch", func(mock sqlmock.Sqlmock, m *idemtest.Mock, insert string) {
					mock.ExpectBegin()
					m.ExpectDo("order-1", hash).WillMismatch()
					mock.ExpectRollback()
				}, idem.Mismatch, nil},
				{"in flight", func(mock sqlmock.Sqlmock, m *idemtest.Mock, insert string) {
					mock.ExpectBegin()
					m.ExpectDo("order-1", hash).WillBeInFlight()
					mock.ExpectRollback()
				}, idem.InFlight, nil},
				{"conflict", func(mock sqlmock.Sqlmock, m *idemtest.Mock, insert string) {
					mock.ExpectBegin()
					m.ExpectDo("order-1", hash).WillConflict()
					mock.ExpectRollback()
				}, 0, idem.ErrRetry},
				{"fn fails", func(mock sqlmock.Sqlmock, m *idemtest.Mock, insert string) {
					mock.ExpectBegin()
					m.ExpectDo("order-1", hash)
					mock.ExpectExec(insert).WillReturnError(errors.New("disk full"))
					m.ExpectAbandon("order-1")
					mock.ExpectRollback()
				}, 0, errors.New("disk full")},
			} {
				t.Run(c.name, func(t *testing.T) {
					for _, equal := range []bool{false, true} {
						matcher := sqlmock.QueryMatcherRegexp
						if equal {
							matcher = sqlmock.QueryMatcherEqual
						}
						db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(matcher))
						if err != nil {
							t.Fatal(err)
						}
						m := idemtest.NewMock(mock, store)
						if equal {
							m.MatchEqual()
						}
						insert := regexp.QuoteMeta(insertSQL)
						if equal {
							insert = insertSQL
						}
						c.expect(mock, m, insert)
						res, err := run(t, db, store, insertOrder)
						switch {
						case c.err != nil && (err == nil || (!errors.Is(err, c.err) && err.Error() != c.err.Error())):
							t.Errorf("Do: %v, want %v", err, c.err)
						case c.err == nil && (err != nil || res.Outcome != c.want):
							t.Errorf("Do = %v, %v, want %v", res.Outcome, err, c.want)
						case c.want == idem.Replay && (res.Response.Status != resp.Status || string(res.Response.Body) != string(resp.Body)):
							t.Errorf("replayed %+v, want %+v", res.Response, resp)
						}
						if err := mock.ExpectationsWereMet(); err != nil {
							t.Error(err)
						}
						db.Close()
					}
				})
			}
		})
	}
}
