package dbtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"testing"
)

// Begins records the options of every transaction begun on the connections
// of a target that RecordBegins wrapped, as the driver is given them: a test
// of a layer that begins transactions for its caller (a middleware, an
// interceptor) sees there which options reached the database.
type Begins struct {
	mu   sync.Mutex
	opts []driver.TxOptions
}

// RecordBegins makes tg's connections record in the returned Begins the
// options of each transaction they begin. It replaces tg.Wrap.
func RecordBegins(tg *Target) *Begins {
	b := &Begins{}
	tg.Wrap = func(base driver.Driver, dsn string) driver.Connector {
		return beginsConnector{base: base, dsn: dsn, b: b}
	}
	return b
}

// Take returns the options recorded since the last Take, and forgets them.
func (b *Begins) Take() []driver.TxOptions {
	b.mu.Lock()
	defer b.mu.Unlock()
	opts := b.opts
	b.opts = nil
	return opts
}

// WantIsolation takes the options recorded since the last Take and fails t
// unless what began at least one transaction, each read-write at level.
func (b *Begins) WantIsolation(t testing.TB, what string, level sql.IsolationLevel) {
	t.Helper()
	opts := b.Take()
	if len(opts) == 0 {
		t.Fatalf("%s began no transaction", what)
	}
	for _, o := range opts {
		if o != (driver.TxOptions{Isolation: driver.IsolationLevel(level)}) {
			t.Errorf("a transaction of %s began with %+v, want isolation %v and read-write", what, o, level)
		}
	}
}

type beginsConnector struct {
	base driver.Driver
	dsn  string
	b    *Begins
}

func (c beginsConnector) Driver() driver.Driver { return c.base }

func (c beginsConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return beginsConn{conn.(fullConn), c.b}, nil
}

// fullConn is what database/sql uses of the connections of every driver
// the tests run: each of them has these methods.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

type beginsConn struct {
	fullConn
	b *Begins
}

func (c beginsConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.b.mu.Lock()
	c.b.opts = append(c.b.opts, opts)
	c.b.mu.Unlock()
	return c.fullConn.BeginTx(ctx, opts)
}
