package idemhttp_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// errConnReset is what a connection that died under a commit reports.
var errConnReset = errors.New("write: connection reset by peer")

// faults tells the connections of a faultyConnector what to get wrong next.
type faults struct {
	// dropCommit makes the next commit roll back instead, and
	// loseReply makes it commit; both then report errConnReset.
	dropCommit, loseReply atomic.Bool
	// failQueries fails every query (not exec) until it is cleared, as
	// the lookup that would settle a lost commit does.
	failQueries atomic.Bool
}

// faultyConnector opens SQLite connections that obey f.
type faultyConnector struct {
	drv driver.Driver
	dsn string
	f   *faults
}

func (c faultyConnector) Driver() driver.Driver { return c.drv }

func (c faultyConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return faultyConn{conn.(sqliteConn), c.f}, nil
}

// sqliteConn is what database/sql uses of a modernc.org/sqlite connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

type faultyConn struct {
	sqliteConn
	f *faults
}

func (c faultyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return faultyTx{tx, c.f}, nil
}

func (c faultyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.f.failQueries.Load() {
		return nil, errConnReset
	}
	return c.sqliteConn.QueryContext(ctx, query, args)
}

type faultyTx struct {
	driver.Tx
	f *faults
}

func (tx faultyTx) Commit() error {
	switch {
	case tx.f.dropCommit.Swap(false):
		if err := tx.Tx.Rollback(); err != nil {
			return err
		}
		return errConnReset
	case tx.f.loseReply.Swap(false):
		if err := tx.Tx.Commit(); err != nil {
			return err
		}
		return errConnReset
	}
	return tx.Tx.Commit()
}

// faultyEnv is an env on SQLite whose connections obey the faults it
// returns.
func faultyEnv(t *testing.T) (*env, *faults) {
	t.Helper()
	f := &faults{}
	tg := dbtest.SQLite(sqliteParams)
	tg.Wrap = func(drv driver.Driver, dsn string) driver.Connector { return faultyConnector{drv, dsn, f} }
	return setup(t, tg), f
}

// attempts wraps h so that it records the body each run read, sets a
// header only its first run sets, and calls before(run) first.
type attempts struct {
	mu     sync.Mutex
	bodies []string
}

func (a *attempts) wrap(h http.Handler, before func(run int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.bodies = append(a.bodies, string(b))
		run := len(a.bodies)
		a.mu.Unlock()
		if run == 1 {
			w.Header().Set("X-First-Attempt", "yes")
		}
		before(run)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		h.ServeHTTP(w, r)
	})
}

func (a *attempts) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bodies...)
}

func TestCommitFailure(t *testing.T) {
	t.Run("the commit is lost and the lookup fails: 503, then the retry runs", func(t *testing.T) {
		e, f := faultyEnv(t)
		var h hook
		var a attempts
		srv := e.serve(t, a.wrap(e.orders(), func(run int) {
			if run == 1 {
				f.dropCommit.Store(true)
				f.failQueries.Store(true) // the claim has run; the lookup will fail
			}
		}), h.option())

		rep := send(t, srv, "POST", "/orders", "k", "book")
		f.failQueries.Store(false)
		wantProblem(t, rep, http.StatusServiceUnavailable, "outcome-unknown", "1")
		if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrCommitUnknown) {
			t.Errorf("ErrorHook got %v, want ErrCommitUnknown", errs)
		}
		if n := e.Effects.Total(t); n != 0 {
			t.Errorf("%d effect rows, want 0: the commit was dropped", n)
		}
		first := send(t, srv, "POST", "/orders", "k", "book")
		wantRan(t, first, http.StatusCreated, 2)
		wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the commit is lost and nothing was stored: the handler runs again", func(t *testing.T) {
		e, f := faultyEnv(t)
		var a attempts
		srv := e.serve(t, a.wrap(e.orders(), func(run int) {
			if run == 1 {
				f.dropCommit.Store(true)
			}
		}))
		body := "book\x00" + strings.Repeat("b", 5000)
		rep := send(t, srv, "POST", "/orders", "k", body)
		wantRan(t, rep, http.StatusCreated, 2)
		if rep.header.Get("X-First-Attempt") != "" {
			t.Error("the response carries a header of the attempt that was rolled back")
		}
		if seen := a.seen(); len(seen) != 2 || seen[0] != body || seen[1] != body {
			t.Errorf("the attempts read %d bodies, want the whole body twice", len(seen))
		}
		wantReplay(t, send(t, srv, "POST", "/orders", "k", body), rep)
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the commit went through but its reply was lost", func(t *testing.T) {
		e, f := faultyEnv(t)
		var a attempts
		srv := e.serve(t, a.wrap(e.orders(), func(int) { f.loseReply.Store(true) }))
		first := send(t, srv, "POST", "/orders", "k", "book")
		wantRan(t, first, http.StatusCreated, 1)
		if first.header.Get("X-First-Attempt") != "yes" {
			t.Error("the response is not the handler's")
		}
		wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
		if n, want := len(a.seen()), 1; n != want {
			t.Errorf("the handler ran %d times, want %d", n, want)
		}
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}
