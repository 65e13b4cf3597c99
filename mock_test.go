package idem_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"regexp"
	"sync"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
)

// recorder notes which of a Store's statements a connection runs, by name.
type recorder struct {
	names map[string]string // SQL text to statement name
	mu    sync.Mutex
	seen  []string
}

func newRecorder(store *idem.Store) *recorder {
	r := &recorder{names: map[string]string{}}
	for name, q := range store.Queries() {
		r.names[q.SQL] = name
	}
	return r
}

func (r *recorder) note(query string) {
	if name, ok := r.names[query]; ok {
		r.mu.Lock()
		r.seen = append(r.seen, name)
		r.mu.Unlock()
	}
}

// take returns the names noted since the last call.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := r.seen
	r.seen = nil
	return seen
}

// recordingConnector opens connections of a driver that tell rec what they run.
type recordingConnector struct {
	base driver.Driver
	dsn  string
	rec  *recorder
}

func (c recordingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &recordingConn{conn.(fullConn), c.rec}, nil
}

func (c recordingConnector) Driver() driver.Driver { return c.base }

type recordingConn struct {
	fullConn
	rec *recorder
}

func (c *recordingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.rec.note(query)
	return c.fullConn.QueryContext(ctx, query, args)
}

func (c *recordingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.rec.note(query)
	return c.fullConn.ExecContext(ctx, query, args)
}

// TestMockMatchesDatabase checks idemtest.Mock against the real databases:
// for each outcome, Do must run the same statements, in the same order,
// against the mock as against the database.
func TestMockMatchesDatabase(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(0))
		ctx := context.Background()
		rec := newRecorder(e.store)
		real := sql.OpenDB(recordingConnector{base: e.db.Driver(), dsn: e.dsn, rec: rec})
		defer real.Close()

		// What the database does for each outcome.
		got := map[idem.Outcome][]string{}
		run := func(db *sql.DB, key string, hash []byte, fn idem.Func) idem.Outcome {
			t.Helper()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.store.Do(ctx, tx, key, hash, fn)
			if err != nil {
				t.Fatalf("Do(%s): %v", key, err)
			}
			if res.Outcome == idem.Claimed {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			return res.Outcome
		}
		insert := sprintf(tg.insertEffect, e.effects)
		fn := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			if _, err := tx.ExecContext(ctx, insert, []byte("k"), "done"); err != nil {
				return idem.Response{}, err
			}
			return created, nil
		}
		for _, o := range []struct {
			hash []byte
			want idem.Outcome
		}{{hashA, idem.Claimed}, {hashA, idem.Replay}, {hashB, idem.Mismatch}} {
			if got := run(real, "k", o.hash, fn); got != o.want {
				t.Fatalf("outcome %v, want %v", got, o.want)
			}
			got[o.want] = rec.take()
		}
		if tg.dialect.Name() == "sqlite" {
			// SQLite never sees a key held by another writer; a record
			// committed unfinished is its one way to InFlight.
			q := "INSERT INTO " + e.table + " (key, request_hash, created_at, expires_at) VALUES (?, ?, 0, 9223372036854775807)"
			if _, err := e.db.ExecContext(ctx, q, []byte("held"), hashA); err != nil {
				t.Fatal(err)
			}
		} else {
			e.hold(t, "held")
		}
		rec.take()
		if o := run(real, "held", hashA, fn); o != idem.InFlight {
			t.Fatalf("outcome %v, want InFlight", o)
		}
		got[idem.InFlight] = rec.take()

		// What the mock expects for each.
		mockDSN := "idem-" + randomName()
		mdb, mock, err := sqlmock.NewWithDSN(mockDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer mdb.Close()
		m := idemtest.NewMock(mock, e.store)
		mrec := newRecorder(e.store)
		mocked := sql.OpenDB(recordingConnector{base: mdb.Driver(), dsn: mockDSN, rec: mrec})
		defer mocked.Close()
		for _, o := range []struct {
			outcome idem.Outcome
			key     string
			expect  func()
		}{
			{idem.Claimed, "k", func() {
				m.ExpectDo("k", hashA)
				mock.ExpectExec(regexp.QuoteMeta(insert)).WillReturnResult(sqlmock.NewResult(1, 1))
				m.ExpectComplete("k", hashA, created)
			}},
			{idem.Replay, "k", func() { m.ExpectDo("k", hashA).WillReplay(created) }},
			{idem.Mismatch, "k", func() { m.ExpectDo("k", hashA).WillMismatch() }},
			{idem.InFlight, "held", func() { m.ExpectDo("held", hashA).WillBeInFlight() }},
		} {
			mock.ExpectBegin()
			o.expect()
			if o.outcome == idem.Claimed {
				mock.ExpectCommit()
			} else {
				mock.ExpectRollback()
			}
			if out := run(mocked, o.key, hashA, fn); out != o.outcome {
				t.Errorf("mock: outcome %v, want %v", out, o.outcome)
			}
			if seen := mrec.take(); !reflect.DeepEqual(seen, got[o.outcome]) {
				t.Errorf("%v: the mock expects %v, the database runs %v", o.outcome, seen, got[o.outcome])
			}
		}
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
}
