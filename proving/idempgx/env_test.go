package idempgx_test

import (
	"context"
	"database/sql"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", for setting up and inspecting tables

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// dsn is the PostgreSQL server of the tests, or "" to skip them.
func dsn(t testing.TB) string {
	t.Helper()
	d := os.Getenv("IDEM_POSTGRES_DSN")
	if d == "" {
		t.Skip("IDEM_POSTGRES_DSN is not set: run scripts/test from the repository root, which starts PostgreSQL")
	}
	return d
}

// env is a Store on a table of its own, with an effect table beside it
// (dbtest.Env, reached through database/sql), and a pgx pool on the same
// database whose round trips are counted.
type env struct {
	*dbtest.Env
	pool  *pgxpool.Pool
	trips *tripCounter
}

// setup makes an env with a pool of at most maxConns connections; the
// Store gets opts.
func setup(t testing.TB, maxConns int32, opts ...idem.Option) *env {
	t.Helper()
	return setupOn(t, dsn(t), maxConns, opts...)
}

// setupOn is setup on the PostgreSQL of url.
func setupOn(t testing.TB, url string, maxConns int32, opts ...idem.Option) *env {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{Env: dbtest.Setup(t, idem.Postgres(), db, opts...), trips: &tripCounter{}}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	// pgxpool pings a connection that was idle for a second before it
	// hands it out: a round trip that a slow machine would add to the
	// counts.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: e.trips}, nil
	}
	e.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	return e
}

// effect returns a Func that writes one effect row for key, in one
// statement, and answers resp.
func (e *env) effect(key string, resp idem.Response) func(context.Context, pgx.Tx) (idem.Response, error) {
	return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
		if _, err := tx.Exec(ctx, e.Effects.InsertSQL(), dbtest.EffectKey(key), "effect"); err != nil {
			return idem.Response{}, err
		}
		return resp, nil
	}
}

// tripCounter counts round trips: a client's write that follows a read
// of the server's answer, or that is its first, starts one. A batch that pgx
// pipelines is written before any answer is read, so it counts once.
type tripCounter struct {
	mu      sync.Mutex
	trips   int
	writing bool
}

func (c *tripCounter) wrote() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.writing {
		c.trips++
		c.writing = true
	}
}

func (c *tripCounter) read() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writing = false
}

// count returns the round trips that f makes.
func (c *tripCounter) count(f func()) int {
	c.mu.Lock()
	before := c.trips
	c.writing = false
	c.mu.Unlock()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trips - before
}

type countingConn struct {
	net.Conn
	n *tripCounter
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.n.wrote()
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.n.read()
	}
	return n, err
}
