package mattnsqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/mattn/go-sqlite3"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/mattnsqlite"
	"github.com/idemgo/idem/idemtest"
)

var (
	hash = idem.Fingerprint([]byte("POST /orders"), []byte("book"))
	resp = idem.Response{Status: 201, Body: []byte(`{"order":1}`)}
)

// do calls Do in a transaction of db and ends it as a caller would.
func do(t *testing.T, db *sql.DB, store *idem.Store, fn idem.Func) (idem.Result, error) {
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

func respond(context.Context, *sql.Tx) (idem.Response, error) { return resp, nil }

// TestMock shows idemtest.Mock on this dialect, which package idem does not
// know: every outcome works as on the built-in ones, except WillConflict.
// idemtest cannot build this driver's sqlite3.Error, so WillConflict fails
// the claim with an error that says so; WillReturnError with the driver's
// own SQLITE_BUSY is the way to expect a conflict.
func TestMock(t *testing.T) {
	store, err := idem.New(mattnsqlite.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		expect func(m *idemtest.Mock, mock sqlmock.Sqlmock)
		check  func(t *testing.T, res idem.Result, err error)
	}{
		{"claimed", func(m *idemtest.Mock, mock sqlmock.Sqlmock) {
			m.ExpectDo("order-1", hash)
			m.ExpectComplete("order-1", hash, resp)
			mock.ExpectCommit()
		}, func(t *testing.T, res idem.Result, err error) {
			if err != nil || res.Outcome != idem.Claimed {
				t.Errorf("Do = %v, %v; want claimed", res.Outcome, err)
			}
		}},
		{"replay", func(m *idemtest.Mock, mock sqlmock.Sqlmock) {
			m.ExpectDo("order-1", hash).WillReplay(resp)
			mock.ExpectRollback()
		}, func(t *testing.T, res idem.Result, err error) {
			if err != nil || res.Outcome != idem.Replay || string(res.Response.Body) != string(resp.Body) {
				t.Errorf("Do = %v %+v, %v; want a replay of %+v", res.Outcome, res.Response, err, resp)
			}
		}},
		{"mismatch", func(m *idemtest.Mock, mock sqlmock.Sqlmock) {
			m.ExpectDo("order-1", hash).WillMismatch()
			mock.ExpectRollback()
		}, func(t *testing.T, res idem.Result, err error) {
			if err != nil || res.Outcome != idem.Mismatch {
				t.Errorf("Do = %v, %v; want mismatch", res.Outcome, err)
			}
		}},
		{"in flight", func(m *idemtest.Mock, mock sqlmock.Sqlmock) {
			m.ExpectDo("order-1", hash).WillBeInFlight()
			mock.ExpectRollback()
		}, func(t *testing.T, res idem.Result, err error) {
			if err != nil || res.Outcome != idem.InFlight {
				t.Errorf("Do = %v, %v; want in flight", res.Outcome, err)
			}
		}},
		{"WillConflict fails loudly", func(m *idemtest.Mock, mock sqlmock.Sqlmock) {
			m.ExpectDo("order-1", hash).WillConflict()
			mock.ExpectRollback()
		}, func(t *testing.T, res idem.Result, err error) {
			if !errors.Is(err, idemtest.ErrNoConflict) || errors.Is(err, idem.ErrRetry) ||
				!strings.Contains(err.Error(), "use WillReturnError with the driver's own conflict error") {
				t.Errorf("Do: %v, want ErrNoConflict, saying to use WillReturnError", err)
			}
		}},
		{"the driver's own conflict", func(m *idemtest.Mock, mock sqlmock.Sqlmock) {
			m.ExpectDo("order-1", hash).WillReturnError(sqlite3.Error{Code: sqlite3.ErrBusy})
			mock.ExpectRollback()
		}, func(t *testing.T, res idem.Result, err error) {
			var e sqlite3.Error
			if !errors.Is(err, idem.ErrRetry) || !errors.As(err, &e) || e.Code != sqlite3.ErrBusy {
				t.Errorf("Do: %v, want ErrRetry with SQLITE_BUSY", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, mock, err := sqlmock.New()
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			m := idemtest.NewMock(mock, store)
			mock.ExpectBegin()
			c.expect(m, mock)
			res, err := do(t, db, store, respond)
			c.check(t, res, err)
			if err := mock.ExpectationsWereMet(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestQuotedTable uses tables whose names need quoting: a keyword, and a
// name qualified by its schema.
func TestQuotedTable(t *testing.T) {
	for _, table := range []string{"order", "main.idem_keys", "aux.order"} {
		t.Run(table, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "idem.db")
			db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_busy_timeout=10000")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// One connection, so that the attached database stays there.
			db.SetMaxOpenConns(1)
			if _, err := db.Exec("ATTACH DATABASE ? AS aux", filepath.Join(t.TempDir(), "aux.db")); err != nil {
				t.Fatal(err)
			}
			store, err := idem.New(mattnsqlite.Dialect(), idem.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 2 { // a second run must do nothing
				if err := store.Migrate(ctx, db); err != nil {
					t.Fatal(err)
				}
			}
			for _, want := range []idem.Outcome{idem.Claimed, idem.Replay} {
				if res, err := do(t, db, store, respond); err != nil || res.Outcome != want {
					t.Fatalf("Do = %v, %v; want %v", res.Outcome, err, want)
				}
			}
			if n, err := store.Purge(ctx, db, 100); err != nil || n != 0 {
				t.Errorf("Purge = %d, %v; want 0 live records purged", n, err)
			}
		})
	}
}
