package idem_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/dbtest"
)

// errReplyLost stands for a connection that dropped while a commit's reply
// was on its way.
var errReplyLost = errors.New("read tcp: connection reset by peer")

// lossy decides what the connections of a lossyConnector do at their next
// commit, and whether their queries fail.
type lossy struct {
	// commit: 0 commits normally; loseReply commits and then reports
	// errReplyLost; loseReplyAndQueries does too, and from then on fails
	// queries; dropCommit rolls back and reports errReplyLost.
	commit      atomic.Int32
	failQueries atomic.Bool

	mu sync.Mutex
	// began holds the options of every transaction begun.
	began []driver.TxOptions
}

const (
	loseReply = 1 + iota
	loseReplyAndQueries
	dropCommit
)

// lossyConnector wraps a real driver's connections, so that a commit's reply
// can be lost after the commit did or did not happen.
type lossyConnector struct {
	base driver.Driver
	dsn  string
	ctl  *lossy
}

func (c lossyConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &lossyConn{conn.(fullConn), c.ctl}, nil
}

func (c lossyConnector) Driver() driver.Driver { return c.base }

type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

type lossyConn struct {
	fullConn
	ctl *lossy
}

func (c *lossyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.ctl.mu.Lock()
	c.ctl.began = append(c.ctl.began, opts)
	c.ctl.mu.Unlock()
	tx, err := c.fullConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &lossyTx{tx, c.ctl}, nil
}

func (c *lossyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.ctl.failQueries.Load() {
		return nil, errReplyLost
	}
	return c.fullConn.QueryContext(ctx, query, args)
}

type lossyTx struct {
	driver.Tx
	ctl *lossy
}

func (t *lossyTx) Commit() error {
	switch t.ctl.commit.Swap(0) {
	case loseReply:
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		return errReplyLost
	case loseReplyAndQueries:
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		t.ctl.failQueries.Store(true)
		return errReplyLost
	case dropCommit:
		if err := t.Tx.Rollback(); err != nil {
			return err
		}
		return errReplyLost
	}
	return t.Tx.Commit()
}

// lossyEnv is an env on SQLite whose connections obey ctl.
func lossyEnv(t *testing.T) (*env, *lossy) {
	t.Helper()
	return lossySetup(t, dbtest.SQLite(""))
}

// lossySetup is setup on tg, with connections that obey the returned ctl.
func lossySetup(t *testing.T, tg target, opts ...idem.Option) (*env, *lossy) {
	t.Helper()
	ctl := &lossy{}
	tg.Wrap = func(base driver.Driver, dsn string) driver.Connector {
		return lossyConnector{base: base, dsn: dsn, ctl: ctl}
	}
	return setup(t, tg, opts...), ctl
}

func TestDoTxLostCommitReply(t *testing.T) {
	ctx := context.Background()

	t.Run("the commit happened", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		runs := 0
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", hashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			ctl.commit.Store(loseReply)
			return e.Effect("k", created)(ctx, tx)
		})
		wantOutcome(t, res, err, idem.Claimed)
		sameResponse(t, res.Response, created)
		if runs != 1 {
			t.Errorf("fn ran %d times, want 1: the commit went through", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the commit did not happen", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		runs := 0
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", hashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			if runs == 1 {
				ctl.commit.Store(dropCommit)
			}
			return e.Effect("k", created)(ctx, tx)
		})
		wantOutcome(t, res, err, idem.Claimed)
		if runs != 2 {
			t.Errorf("fn ran %d times, want 2: nothing was committed the first time", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the lookup fails too", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		_, err := e.Store.DoTx(ctx, e.DB, nil, "k", hashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			ctl.commit.Store(loseReply)
			resp, err := e.Effect("k", created)(ctx, tx)
			ctl.failQueries.Store(true) // after the claim, before the lookup
			return resp, err
		})
		if !errors.Is(err, idem.ErrCommitUnknown) || !errors.Is(err, errReplyLost) {
			t.Errorf("DoTx: %v, want ErrCommitUnknown wrapping the commit's error", err)
		}
		ctl.failQueries.Store(false)
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", hashA, mustNotRun(t))
		wantOutcome(t, res, err, idem.Replay)
	})
}

func TestDoTxEndsItsTransaction(t *testing.T) {
	ctx := context.Background()
	e := setup(t, dbtest.SQLite(""))
	e.DB.SetMaxOpenConns(1) // a transaction left open would block the next call

	t.Run("on a panic", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("DoTx swallowed fn's panic")
			}
		}()
		_, _ = e.Store.DoTx(ctx, e.DB, nil, "k", hashA, func(context.Context, *sql.Tx) (idem.Response, error) {
			panic("handler bug")
		})
	})
	for _, o := range []struct {
		name string
		fn   idem.Func
	}{
		{"on an error", func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, errors.New("no") }},
		{"on Claimed", e.Effect("k", created)},
		{"on Replay", mustNotRun(t)},
	} {
		t.Run(o.name, func(t *testing.T) {
			_, _ = e.Store.DoTx(ctx, e.DB, nil, "k", hashA, o.fn)
			if n := e.DB.Stats().InUse; n != 0 {
				t.Errorf("%d connections still in use", n)
			}
		})
	}
	if n := e.EffectCount(t, "k"); n != 1 {
		t.Errorf("%d effect rows, want 1", n)
	}
}
