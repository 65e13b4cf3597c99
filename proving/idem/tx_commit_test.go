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
	"github.com/idemgo/idem/proving/dbtest"
)

// errReplyLost stands for a connection that dropped while a commit's reply
// was on its way.
var errReplyLost = errors.New("read tcp: connection reset by peer")

// lossy decides what the connections of a lossyConnector do at their next
// commit, and whether their queries fail.
type lossy struct {
	// commit: 0 commits normally; loseReply commits and then reports
	// errReplyLost; loseReplyAndQueries does too, and from then on fails
	// queries; dropCommit rolls back and reports errReplyLost; landLate
	// reports errReplyLost at once and commits later, at the first BEGIN
	// after a query has run: after the lookup that settles the commit, as
	// a COMMIT held up on the network reaches the server late.
	commit      atomic.Int32
	failQueries atomic.Bool
	// landed, when set, is called once a late commit has landed, before
	// the BEGIN that landed it goes on.
	landed func()

	mu sync.Mutex
	// began holds the options of every transaction begun.
	began []driver.TxOptions
	// late is the commit that landLate holds back, and looked whether a
	// query has run since.
	late   *lossyTx
	looked bool
}

const (
	loseReply = 1 + iota
	loseReplyAndQueries
	dropCommit
	landLate
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
	return &lossyConn{fullConn: conn.(fullConn), ctl: c.ctl}, nil
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
	// holding is true while landLate holds this connection's commit
	// back, and closed once database/sql closed it meanwhile; both under
	// ctl.mu.
	holding, closed bool
}

func (c *lossyConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.ctl.mu.Lock()
	c.ctl.began = append(c.ctl.began, opts)
	late := c.ctl.late
	if late != nil && c.ctl.looked {
		c.ctl.late = nil
	} else {
		late = nil
	}
	c.ctl.mu.Unlock()
	if late != nil {
		if err := late.land(); err != nil {
			return nil, err
		}
		if c.ctl.landed != nil {
			c.ctl.landed()
		}
	}
	tx, err := c.fullConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &lossyTx{Tx: tx, ctl: c.ctl, conn: c}, nil
}

func (c *lossyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.ctl.failQueries.Load() {
		return nil, errReplyLost
	}
	c.ctl.mu.Lock()
	c.ctl.looked = true
	c.ctl.mu.Unlock()
	return c.fullConn.QueryContext(ctx, query, args)
}

// IsValid keeps database/sql from handing out again a connection whose
// commit landLate holds back: it closes it instead.
func (c *lossyConn) IsValid() bool {
	c.ctl.mu.Lock()
	defer c.ctl.mu.Unlock()
	if c.holding {
		return false
	}
	if v, ok := c.fullConn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// Close leaves a connection whose commit landLate holds back open until
// the commit lands.
func (c *lossyConn) Close() error {
	c.ctl.mu.Lock()
	defer c.ctl.mu.Unlock()
	if c.holding {
		c.closed = true
		return nil
	}
	return c.fullConn.Close()
}

type lossyTx struct {
	driver.Tx
	ctl  *lossy
	conn *lossyConn
}

// land commits the transaction that landLate held back, and closes its
// connection if database/sql closed it meanwhile.
func (t *lossyTx) land() error {
	err := t.Tx.Commit()
	t.ctl.mu.Lock()
	t.conn.holding = false
	closed := t.conn.closed
	t.ctl.mu.Unlock()
	if closed {
		t.conn.fullConn.Close()
	}
	return err
}

func (t *lossyTx) Commit() error {
	switch t.ctl.commit.Swap(0) {
	case landLate:
		t.ctl.mu.Lock()
		t.ctl.late, t.ctl.looked, t.conn.holding = t, false, true
		t.ctl.mu.Unlock()
		return errReplyLost
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
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			ctl.commit.Store(loseReply)
			return e.Effect("k", dbtest.Created)(ctx, tx)
		})
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, dbtest.Created)
		if runs != 1 {
			t.Errorf("fn ran %d times, want 1: the commit went through", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the commit landed after the lookup", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		other := make(chan idem.Outcome, 1)
		ctl.landed = func() {
			res, _ := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, dbtest.MustNotRun(t))
			other <- res.Outcome
		}
		runs := 0
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			if runs == 1 {
				ctl.commit.Store(landLate)
			}
			return e.Effect("k", dbtest.Created)(ctx, tx)
		})
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, dbtest.Created)
		if runs != 1 {
			t.Errorf("fn ran %d times, want 1: the commit landed", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
		select {
		case got := <-other:
			if got != idem.Replay {
				t.Errorf("another call once the commit landed: %v, want Replay", got)
			}
		default:
			t.Error("the held commit never landed")
		}
	})

	t.Run("the commit did not happen", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		runs := 0
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			if runs == 1 {
				ctl.commit.Store(dropCommit)
			}
			return e.Effect("k", dbtest.Created)(ctx, tx)
		})
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		if runs != 2 {
			t.Errorf("fn ran %d times, want 2: nothing was committed the first time", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the lookup fails too", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		_, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			ctl.commit.Store(loseReply)
			resp, err := e.Effect("k", dbtest.Created)(ctx, tx)
			ctl.failQueries.Store(true) // after the claim, before the lookup
			return resp, err
		})
		if !errors.Is(err, idem.ErrCommitUnknown) || !errors.Is(err, errReplyLost) {
			t.Errorf("DoTx: %v, want ErrCommitUnknown wrapping the commit's error", err)
		}
		ctl.failQueries.Store(false)
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
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
		_, _ = e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(context.Context, *sql.Tx) (idem.Response, error) {
			panic("handler bug")
		})
	})
	for _, o := range []struct {
		name string
		fn   idem.Func
	}{
		{"on an error", func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, errors.New("no") }},
		{"on Claimed", e.Effect("k", dbtest.Created)},
		{"on Replay", dbtest.MustNotRun(t)},
	} {
		t.Run(o.name, func(t *testing.T) {
			_, _ = e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, o.fn)
			if n := e.DB.Stats().InUse; n != 0 {
				t.Errorf("%d connections still in use", n)
			}
		})
	}
	if n := e.EffectCount(t, "k"); n != 1 {
		t.Errorf("%d effect rows, want 1", n)
	}
}
