package fault

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrReplyLost stands for a connection that dropped while a commit's reply
// was on its way: what Lossy's connections answer a commit that they lose.
var ErrReplyLost = errors.New("read tcp: connection reset by peer")

// Commit is what Lossy's connections do at their next commit.
type Commit int32

const (
	// CommitNormally commits.
	CommitNormally Commit = iota
	// LoseReply commits, then reports ErrReplyLost.
	LoseReply
	// LoseReplyAndQueries does too, and from then on fails every query
	// with ErrReplyLost, until FailQueries(false).
	LoseReplyAndQueries
	// DropCommit rolls back, then reports ErrReplyLost.
	DropCommit
	// LandLate reports ErrReplyLost at once and commits later, at the
	// first BEGIN after a query has run: after the lookup that settles
	// the commit, as a COMMIT held up on the network reaches the server
	// late.
	LandLate
)

// Lossy decides what the connections of its Connector do at their next
// commit, and whether their queries fail. Its zero value commits
// normally.
type Lossy struct {
	commit      atomic.Int32 // a Commit, for the next commit alone
	failQueries atomic.Bool
	// Landed, when set, is called once a late commit has landed, before
	// the BEGIN that landed it goes on.
	Landed func()
	// Before, when set, is called before each statement that a
	// connection sends, with the statement's context and text, and
	// before each commit, whatever the commit then does, with the context
	// that began the transaction and "COMMIT": where a process that is to
	// die, or to kill its server, around a statement does it.
	Before func(ctx context.Context, statement string)

	mu sync.Mutex
	// began holds the options of every transaction begun.
	began []driver.TxOptions
	// late is the commit that LandLate holds back, and looked whether a
	// query has run since.
	late   *lossyTx
	looked bool
}

// SetCommit makes the next commit of any connection do c.
func (l *Lossy) SetCommit(c Commit) { l.commit.Store(int32(c)) }

// Pending is what the next commit will do: CommitNormally once the one
// that SetCommit set has happened.
func (l *Lossy) Pending() Commit { return Commit(l.commit.Load()) }

// FailQueries makes every query fail with ErrReplyLost, or no longer.
func (l *Lossy) FailQueries(fail bool) { l.failQueries.Store(fail) }

// Began returns the options of every transaction begun since the last
// ResetBegan.
func (l *Lossy) Began() []driver.TxOptions {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]driver.TxOptions(nil), l.began...)
}

// ResetBegan forgets the transactions begun so far.
func (l *Lossy) ResetBegan() {
	l.mu.Lock()
	l.began = nil
	l.mu.Unlock()
}

// Connector is a database/sql connector of base's connections to dsn that
// obey l: sql.OpenDB(l.Connector(base, dsn)).
func (l *Lossy) Connector(base driver.Driver, dsn string) driver.Connector {
	return lossyConnector{base: base, dsn: dsn, ctl: l}
}

// lossyConnector wraps a real driver's connections, so that a commit's reply
// can be lost after the commit did or did not happen.
type lossyConnector struct {
	base driver.Driver
	dsn  string
	ctl  *Lossy
}

func (c lossyConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: conn.(Conn), ctl: c.ctl}, nil
}

func (c lossyConnector) Driver() driver.Driver { return c.base }

// Conn is what a connection of a driver that idem is tested with
// implements, and what the wrappers of the proving ground pass on.
type Conn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

type lossyConn struct {
	Conn
	ctl *Lossy
	// holding is true while LandLate holds this connection's commit
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
		if c.ctl.Landed != nil {
			c.ctl.Landed()
		}
	}
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &lossyTx{Tx: tx, ctl: c.ctl, conn: c, ctx: ctx}, nil
}

func (c *lossyConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.ctl.Before != nil {
		c.ctl.Before(ctx, query)
	}
	return c.Conn.ExecContext(ctx, query, args)
}

func (c *lossyConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.ctl.Before != nil {
		c.ctl.Before(ctx, query)
	}
	if c.ctl.failQueries.Load() {
		return nil, ErrReplyLost
	}
	c.ctl.mu.Lock()
	c.ctl.looked = true
	c.ctl.mu.Unlock()
	return c.Conn.QueryContext(ctx, query, args)
}

// IsValid keeps database/sql from handing out again a connection whose
// commit LandLate holds back: it closes it instead.
func (c *lossyConn) IsValid() bool {
	c.ctl.mu.Lock()
	defer c.ctl.mu.Unlock()
	if c.holding {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// Close leaves a connection whose commit LandLate holds back open until
// the commit lands.
func (c *lossyConn) Close() error {
	c.ctl.mu.Lock()
	defer c.ctl.mu.Unlock()
	if c.holding {
		c.closed = true
		return nil
	}
	return c.Conn.Close()
}

type lossyTx struct {
	driver.Tx
	ctl  *Lossy
	conn *lossyConn
	ctx  context.Context // the one that began it, for Before
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
		t.conn.Conn.Close()
	}
	return err
}

func (t *lossyTx) Commit() error {
	if t.ctl.Before != nil {
		t.ctl.Before(t.ctx, "COMMIT")
	}
	switch t.ctl.commit.Swap(0) {
	case int32(LandLate):
		t.ctl.mu.Lock()
		t.ctl.late, t.ctl.looked, t.conn.holding = t, false, true
		t.ctl.mu.Unlock()
		return ErrReplyLost
	case int32(LoseReply):
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		return ErrReplyLost
	case int32(LoseReplyAndQueries):
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		t.ctl.failQueries.Store(true)
		return ErrReplyLost
	case int32(DropCommit):
		if err := t.Tx.Rollback(); err != nil {
			return err
		}
		return ErrReplyLost
	}
	return t.Tx.Commit()
}
