package ginrouter_test

import (
	"database/sql"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/examples/ecosystem/internal/routertest"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/routers/ginrouter"
	"github.com/idemgo/idem/idemhttp"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode) // no route listing on standard output
	os.Exit(m.Run())
}

// newMiddleware is the middleware of the tests that need no account: keys
// are global, as for an API with a single client.
func newMiddleware(t *testing.T, store *idem.Store, db *sql.DB, opts ...idemhttp.Option) *idemhttp.Middleware {
	t.Helper()
	mw, err := idemhttp.New(store, db, nil, append(opts, idemhttp.WithSingleClient())...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

func TestOrders(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	routertest.Run(t, ginrouter.Routes(routertest.ProtectT(t, testdb.StoreT(t), db.DB)), db)
}

// TestStatusOnly checks that a status set with c.Status and no body, which
// gin sends only when its chain ends, reaches the middleware, is stored,
// and is replayed.
func TestStatusOnly(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	r := gin.New()
	mw := newMiddleware(t, testdb.StoreT(t), db.DB)
	r.POST("/accepted", ginrouter.Wrap(mw.Handler, func(c *gin.Context) { c.Status(http.StatusAccepted) }))
	for i, want := range []string{"", "true"} {
		got := routertest.Post(t, r, "/accepted", "k", "")
		if got.Status != http.StatusAccepted || got.Header.Get(idemhttp.ReplayedHeader) != want {
			t.Errorf("request %d: %d, replayed %q; want 202, replayed %q", i+1, got.Status, got.Header.Get(idemhttp.ReplayedHeader), want)
		}
	}
}

// TestMiddlewareAnswers checks that when the middleware answers on its own
// the gin handler does not run, the chain stops, and nothing is added to
// the middleware's answer.
func TestMiddlewareAnswers(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	var runs, after atomic.Int32
	r := gin.New()
	mw := newMiddleware(t, testdb.StoreT(t), db.DB, idemhttp.WithKeyRequired())
	r.POST("/orders", ginrouter.Wrap(mw.Handler, func(c *gin.Context) {
		runs.Add(1)
		c.String(http.StatusCreated, "created")
	}), func(c *gin.Context) {
		after.Add(1)
		c.String(http.StatusTeapot, "late")
	})

	first := routertest.Post(t, r, "/orders", "k", "a")
	noKey := routertest.Post(t, r, "/orders", "", "a")
	replay := routertest.Post(t, r, "/orders", "k", "a")
	reused := routertest.Post(t, r, "/orders", "k", "b")
	switch {
	case first.Status != http.StatusCreated || string(first.Body) != "created":
		t.Errorf("first: %d %q", first.Status, first.Body)
	case noKey.Status != http.StatusBadRequest:
		t.Errorf("no key: %d, want 400", noKey.Status)
	case replay.Status != http.StatusCreated || string(replay.Body) != "created":
		t.Errorf("replay: %d %q", replay.Status, replay.Body)
	case reused.Status != http.StatusUnprocessableEntity:
		t.Errorf("reused key: %d, want 422", reused.Status)
	}
	if runs.Load() != 1 || after.Load() != 0 {
		t.Errorf("the handler ran %d times, the handler after Wrap %d; want 1 and 0", runs.Load(), after.Load())
	}
}

// conflictOnce is the SQLite dialect, except that it reports the error of
// the trigger that TestRunsAgain installs as a conflict to retry, as
// PostgreSQL reports a serialization failure.
type conflictOnce struct{ idem.Dialect }

func (d conflictOnce) Classify(err error) dialect.ErrorKind {
	if err != nil && strings.Contains(err.Error(), "injected conflict") {
		return dialect.ErrorRetry
	}
	return d.Dialect.Classify(err)
}

// TestRunsAgain drives the case that rules out an adapter built on c.Next:
// the first attempt's transaction fails with a conflict after the handler
// ran, DoTx runs the transaction again, and Wrap runs the gin handler
// again, with a fresh writer, whose response is the one stored and sent.
func TestRunsAgain(t *testing.T) {
	t.Parallel()
	db := testdb.OpenT(t)
	// A row in fail_once makes the statement that completes the key's
	// record fail; the row is written in the first attempt's transaction,
	// and undone with it.
	for _, q := range []string{
		`CREATE TABLE fail_once (x INTEGER)`,
		`CREATE TRIGGER conflict_once BEFORE UPDATE ON ` + idem.DefaultTable + `
		 WHEN EXISTS (SELECT 1 FROM fail_once) BEGIN SELECT RAISE(ABORT, 'injected conflict'); END`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	store, err := idem.New(conflictOnce{idem.SQLite()})
	if err != nil {
		t.Fatal(err)
	}

	var attempts atomic.Int32
	r := gin.New()
	r.POST("/orders", ginrouter.Wrap(newMiddleware(t, store, db.DB).Handler, func(c *gin.Context) {
		n := attempts.Add(1)
		ctx := c.Request.Context()
		tx := idemhttp.Tx(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES ('book')`); err != nil {
			c.String(http.StatusInternalServerError, err.Error())
			return
		}
		if n == 1 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO fail_once VALUES (1)`); err != nil {
				c.String(http.StatusInternalServerError, err.Error())
				return
			}
		}
		c.String(http.StatusCreated, "attempt %d", n)
	}))

	got := routertest.Post(t, r, "/orders", "k", "a")
	if got.Status != http.StatusCreated || string(got.Body) != "attempt 2" || attempts.Load() != 2 {
		t.Errorf("%d %q after %d runs of the handler, want 201 \"attempt 2\" after 2", got.Status, got.Body, attempts.Load())
	}
	if n := db.CountT(t, "orders"); n != 1 {
		t.Errorf("%d orders, want 1: the first attempt's was rolled back", n)
	}
	replay := routertest.Post(t, r, "/orders", "k", "a")
	if string(replay.Body) != "attempt 2" || replay.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("retry: %d %q, want the second attempt's response replayed", replay.Status, replay.Body)
	}
}
