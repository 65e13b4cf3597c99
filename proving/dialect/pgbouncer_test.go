package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestPgBouncerPreparedStatements shows why pgx needs
// default_query_exec_mode=exec (or simple_protocol) behind PgBouncer in
// transaction pooling mode, through pgx's database/sql driver. Two clients
// of one connection each call DoTx, one after the other, through a pool of
// one server connection, so that both transactions run in the same server
// session. With pgx's default, the first client's pgx prepares idem's
// statements there under names made of their text, and the second's
// prepares the same names in the same session: PostgreSQL refuses
// (SQLSTATE 42P05, "prepared statement already exists"), and the Store's
// error says what to set. With a pool of many server connections the same
// happens whenever two clients' transactions meet on one of them, which is
// how it shows in a busy service: now and then. In exec and simple_protocol
// mode pgx prepares no named statement, and both clients claim their keys.
func TestPgBouncerPreparedStatements(t *testing.T) {
	if dbtest.PgBouncerDSN() == "" {
		t.Skip(dbtest.SkipPgBouncerReason)
	}
	for _, c := range dbtest.PgxExecModes {
		t.Run(dbtest.PgxExecModeName(c.Mode), func(t *testing.T) {
			// The Store's table, created through the big pool.
			e := dbtest.PgBouncerTargets()[0].Setup(t)
			single := dbtest.PgBouncerSingleSession(t, "pgx")
			source := single
			if c.Mode != "" {
				source = dbtest.WithParams(single, "default_query_exec_mode="+c.Mode)
			}
			var clients [2]*sql.DB
			for i := range clients {
				db, err := sql.Open("pgx", source)
				if err != nil {
					t.Fatal(err)
				}
				db.SetMaxOpenConns(1)
				t.Cleanup(func() { db.Close() })
				clients[i] = db
			}
			ctx := context.Background()
			res, err := e.Store.DoTx(ctx, clients[0], nil, "k0", dbtest.HashA, e.Effect("k0", dbtest.Created))
			dbtest.WantOutcome(t, res, err, idem.Claimed)
			res, err = e.Store.DoTx(ctx, clients[1], nil, "k1", dbtest.HashA, e.Effect("k1", dbtest.Created))
			if !c.Fails {
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				// And the first client again, on the session the second
				// used last.
				res, err = e.Store.DoTx(ctx, clients[0], nil, "k2", dbtest.HashA, e.Effect("k2", dbtest.Created))
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				return
			}
			dbtest.WantPreparedStatementClash(t, err, e.EffectCount(t, "k1"))
		})
	}
}

// TestPgBouncerLibPqBinaryParameters shows why lib/pq needs
// binary_parameters=yes behind PgBouncer in transaction pooling mode. Out
// of a transaction, lib/pq sends a statement with values in two round
// trips by default: the Parse of the unnamed statement, ended by a Sync,
// and then its Bind and Execute. After the Sync the client holds no
// transaction, and PgBouncer may hand the server session to another
// client, whose own Parse replaces the unnamed statement there. Through a
// pool of one server session, a client's Lookup, which reads outside any
// transaction, is held between its two round trips (bindGate) while
// another client runs a statement of three values: the Bind of Lookup's
// one value then meets the other client's statement, and PostgreSQL
// refuses it (08P01, or 26000 where the session has no unnamed statement);
// had both statements taken as many values, it would have run the other
// one. With binary_parameters=yes, lib/pq sends the Parse, the Bind and the
// Execute in one round trip, which nothing comes between, and Lookup
// answers with the stored response. Lookup's error names the setting.
func TestPgBouncerLibPqBinaryParameters(t *testing.T) {
	if dbtest.PgBouncerDSN() == "" {
		t.Skip(dbtest.SkipPgBouncerReason)
	}
	for _, binary := range []bool{false, true} {
		name := "default"
		if binary {
			name = dbtest.PqPoolerParams
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := dbtest.PgBouncerTargets()[0].Setup(t)
			res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, e.Effect("k", dbtest.Created))
			dbtest.WantOutcome(t, res, err, idem.Claimed)

			single := dbtest.PgBouncerSingleSession(t, "postgres")
			if binary {
				single = dbtest.WithParams(single, dbtest.PqPoolerParams)
			}
			connector, err := pq.NewConnector(single)
			if err != nil {
				t.Fatal(err)
			}
			gate := &bindGate{held: make(chan struct{}), release: make(chan struct{})}
			connector.Dialer(gate)
			held := sql.OpenDB(connector)
			other, err := sql.Open("postgres", single)
			if err != nil {
				t.Fatal(err)
			}
			for _, db := range []*sql.DB{held, other} {
				db.SetMaxOpenConns(1)
				t.Cleanup(func() { db.Close() })
				if err := db.PingContext(ctx); err != nil {
					t.Fatal(err)
				}
			}
			gate.armed.Store(true)

			type answer struct {
				res idem.Result
				err error
			}
			looked := make(chan answer, 1)
			go func() {
				res, err := e.Store.Lookup(ctx, held, "k")
				looked <- answer{res, err}
			}()
			var got answer
			select {
			case <-gate.held: // between the Parse and the Bind
				var a, b, c string
				if err := other.QueryRowContext(ctx, "SELECT $1::text, $2::text, $3::text", "x", "y", "z").Scan(&a, &b, &c); err != nil {
					t.Fatalf("the other client's statement: %v", err)
				}
				close(gate.release)
				got = <-looked
			case got = <-looked: // in one round trip
				close(gate.release)
			}

			if binary {
				dbtest.WantOutcome(t, got.res, got.err, idem.Replay)
				dbtest.SameResponse(t, got.res.Response, dbtest.Created)
				return
			}
			var pqErr *pq.Error
			if !errors.As(got.err, &pqErr) || (pqErr.Code != "08P01" && pqErr.Code != "26000") {
				t.Fatalf("Lookup held between its Parse and its Bind: %v, %v; want SQLSTATE 08P01 or 26000", got.res.Outcome, got.err)
			}
			if !strings.Contains(got.err.Error(), dbtest.PqPoolerParams) {
				t.Errorf("Lookup's error %q does not name %s", got.err, dbtest.PqPoolerParams)
			}
		})
	}
}

// bindGate dials lib/pq's connections, and once armed, holds the first
// write that begins with a Bind message ('B') until release is closed,
// after closing held: the second round trip of a statement that lib/pq
// sends in two.
type bindGate struct {
	armed   atomic.Bool
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (g *bindGate) Dial(network, address string) (net.Conn, error) {
	return g.DialContext(context.Background(), network, address)
}

func (g *bindGate) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.DialContext(ctx, network, address)
}

func (g *bindGate) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return gatedConn{Conn: c, g: g}, nil
}

type gatedConn struct {
	net.Conn
	g *bindGate
}

func (c gatedConn) Write(p []byte) (int, error) {
	if c.g.armed.Load() && len(p) > 0 && p[0] == 'B' {
		c.g.once.Do(func() {
			close(c.g.held)
			<-c.g.release
		})
	}
	return c.Conn.Write(p)
}
