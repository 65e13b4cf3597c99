package idem_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// sessionLockWait is the sessions' own innodb_lock_wait_timeout in
// TestClaimLeavesNoSetting, set in the DSN, unlike the Store's lock timeout.
const sessionLockWait = 7

// TestClaimLeavesNoSetting shows that no setting of a claim outlives idem's
// use of a pooled connection on the MySQL family, whatever ends the claim:
// the context ends before, during or after each statement of Do, DoTx and
// Run, on a new key, a held one and a finished one; the connection of a
// claim that waits drops; a deadlock picks the claim as its victim. After
// each call, every connection of the pool, held to two (three where a
// third drops one), must show the session's own lock wait and no variable of
// idem's.
func TestClaimLeavesNoSetting(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		if tg.Family != "mysql" {
			t.Skip("sessions with settings are the MySQL family's")
		}
		ctl := &cutter{}
		tg = dbtest.TargetWithParams(tg, fmt.Sprintf("innodb_lock_wait_timeout=%d", sessionLockWait))
		tg.Wrap = func(base driver.Driver, dsn string) driver.Connector {
			return cutConnector{base: base, dsn: dsn, ctl: ctl}
		}
		e := setup(t, tg, idem.WithLockTimeout(time.Second))
		const conns = 2
		e.DB.SetMaxOpenConns(conns)
		e.DB.SetMaxIdleConns(conns)

		finished := "finished"
		if _, err := e.Store.DoTx(context.Background(), e.DB, nil, finished, dbtest.HashA, e.Effect(finished, dbtest.Created)); err != nil {
			t.Fatal(err)
		}
		calls := map[string]func(ctx context.Context, key string) error{
			"Do": func(ctx context.Context, key string) error {
				tx, err := e.DB.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback() }()
				_, err = e.Store.Do(ctx, tx, key, dbtest.HashA, e.Effect(key, dbtest.Created))
				if err == nil {
					err = tx.Commit()
				}
				return err
			},
			"DoTx": func(ctx context.Context, key string) error {
				_, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, e.Effect(key, dbtest.Created))
				return err
			},
			"Run": func(ctx context.Context, key string) error {
				_, err := e.Store.Run(ctx, e.DB, nil, key, dbtest.HashA,
					idem.Phase("effect", func(ctx context.Context, tx *sql.Tx) error {
						_, err := e.Effect(key, dbtest.Created)(ctx, tx)
						return err
					}),
					idem.Final("done", func(context.Context, *sql.Tx) (idem.Response, error) { return dbtest.Created, nil }))
				return err
			},
		}
		for name, call := range calls {
			for _, when := range []cutWhen{cutBefore, cutAfter} {
				for _, key := range []string{"new", finished} {
					t.Run(fmt.Sprintf("%s/%s/%s", name, when, key), func(t *testing.T) {
						for at := 1; ; at++ {
							k := key
							if k == "new" {
								k = fmt.Sprintf("new-%s-%s-%d", name, when, at)
							}
							if !ctl.cut(at, when, func(ctx context.Context) { _ = call(ctx, k) }) {
								break
							}
							checkSessions(t, e.DB, conns, fmt.Sprintf("cut %s statement %d", when, at))
						}
					})
				}
			}
			// A claim that waits for a held key, cut off while it waits.
			t.Run(name+"/during/held", func(t *testing.T) {
				holder := e.Begin(t, nil)
				if _, err := e.Store.Do(context.Background(), holder, "held-"+name, dbtest.HashA, e.Effect("held-"+name, dbtest.Created)); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = holder.Rollback() }()
				if !ctl.cut(0, cutDuring, func(ctx context.Context) { _ = call(ctx, "held-"+name) }) {
					t.Fatal("no statement waited")
				}
				checkSessions(t, e.DB, conns-1, "cut during the wait")
			})
		}

		// A claim whose connection drops while it waits for a held key:
		// the server ends the session. The claim waits a minute, so that
		// it is still waiting, on a busy machine too, when half a second
		// later its connection is killed; were it killed sooner, its
		// connection would drop all the same.
		patient := dbtest.NewStore(t, tg.Dialect, e.Table, idem.WithLockTimeout(time.Minute))
		t.Run("dropped", func(t *testing.T) {
			ctx := context.Background()
			// The holder, the claimer, and the one that drops it.
			e.DB.SetMaxOpenConns(conns + 1)
			e.DB.SetMaxIdleConns(conns + 1)
			holder := e.Hold(t, "dropped", dbtest.HashA, dbtest.Created)
			conn, err := e.DB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var id int64
			if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				tx, err := conn.BeginTx(ctx, nil)
				if err == nil {
					_, err = patient.Do(ctx, tx, "dropped", dbtest.HashA, e.Effect("dropped", dbtest.Created))
					_ = tx.Rollback()
				}
				done <- err
			}()
			time.Sleep(500 * time.Millisecond)
			if _, err := e.DB.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err == nil {
				t.Fatal("the claim whose connection dropped succeeded")
			}
			_ = conn.Close()
			_ = holder.Rollback()
			checkSessions(t, e.DB, conns+1, "after the dropped connection")
		})

		// A deadlock whose victim is a claim: each transaction holds a key
		// that the other claims. The two claims wait for each other, in
		// whichever order they come, for as long as the server takes to
		// see the cycle.
		t.Run("deadlock", func(t *testing.T) {
			ctx := context.Background()
			holder, victim := e.Begin(t, nil), e.Begin(t, nil)
			claim := func(tx *sql.Tx, key string) (idem.Result, error) {
				return patient.Do(ctx, tx, key, dbtest.HashA, e.Effect(key, dbtest.Created))
			}
			for i := range 20 {
				if _, err := claim(holder, fmt.Sprintf("heavy-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := claim(holder, "x"); err != nil {
				t.Fatal(err)
			}
			if _, err := claim(victim, "y"); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := claim(victim, "x")
				done <- err
			}()
			// InnoDB picks the transaction that holds less, TiDB the one
			// that closes the cycle.
			_, herr := claim(holder, "y")
			err := <-done
			if errors.Is(err, idem.ErrRetry) == errors.Is(herr, idem.ErrRetry) {
				t.Fatalf("the claims in the cycle: %v and %v, want ErrRetry for one of them", err, herr)
			}
			_ = victim.Rollback()
			_ = holder.Rollback()
			checkSessions(t, e.DB, conns+1, "after the deadlock")
		})
	})
}

// checkSessions takes n connections from db's pool, which holds no more,
// and fails t if one of them has a lock wait other than the session's own or
// the user variable that idem's claim once kept it in.
func checkSessions(t *testing.T, db *sql.DB, n int, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cs []*sql.Conn
	defer func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("%s: a connection of the pool: %v", what, err)
		}
		cs = append(cs, c)
		var (
			wait int64
			kept sql.NullString
		)
		if err := c.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout, @idem_lock_wait").Scan(&wait, &kept); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if wait != sessionLockWait || kept.Valid {
			t.Errorf("%s: a pooled session has innodb_lock_wait_timeout %d and @idem_lock_wait %v, want its own %d and none", what, wait, kept, sessionLockWait)
		}
	}
}

// cutWhen says when a cutter ends the context, around the statement it
// cuts.
type cutWhen int

const (
	cutBefore cutWhen = iota
	cutAfter
	cutDuring // 100 ms into the first statement that runs that long, whatever at
)

func (w cutWhen) String() string { return [...]string{"before", "after", "during"}[w] }

// cutter ends the context of one call at one statement of its, counted
// from the call's start: transactions begun, statements, and commits.
type cutter struct {
	mu     sync.Mutex
	armed  bool
	n, at  int
	when   cutWhen
	cancel context.CancelFunc
	fired  bool
}

// cut runs call with a context that it ends at statement at, as when
// says, and reports whether the call came that far (with cutDuring, whether
// a statement ran long enough).
func (c *cutter) cut(at int, when cutWhen, call func(ctx context.Context)) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.mu.Lock()
	c.armed, c.n, c.at, c.when, c.cancel, c.fired = true, 0, at, when, cancel, false
	c.mu.Unlock()
	call(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	return c.fired
}

// statement runs one statement of the connections, and ends the context
// around it if it is the one to cut.
func (c *cutter) statement(run func() error) error {
	c.mu.Lock()
	hit := false
	if c.armed {
		c.n++
		hit = c.n == c.at && c.when != cutDuring
		c.fired = c.fired || hit
	}
	armed, when, cancel := c.armed, c.when, c.cancel
	c.mu.Unlock()
	if armed && when == cutDuring {
		stop := time.AfterFunc(100*time.Millisecond, func() {
			c.mu.Lock()
			c.fired = true
			c.mu.Unlock()
			cancel()
		})
		defer stop.Stop()
		return run()
	}
	if !hit {
		return run()
	}
	if when == cutBefore {
		cancel()
		return run()
	}
	err := run()
	cancel()
	return err
}

// cutConnector wraps a real driver's connections for a cutter. They keep
// the driver's session reset and validation, so that database/sql puts a
// connection whose transaction a context ended back in its pool, as it
// does with go-sql-driver/mysql.
type cutConnector struct {
	base driver.Driver
	dsn  string
	ctl  *cutter
}

func (c cutConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &cutConn{conn.(cutBase), c.ctl}, nil
}

func (c cutConnector) Driver() driver.Driver { return c.base }

type cutBase interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.SessionResetter
	driver.Validator
}

type cutConn struct {
	cutBase
	ctl *cutter
}

func (c *cutConn) BeginTx(ctx context.Context, opts driver.TxOptions) (tx driver.Tx, err error) {
	err = c.ctl.statement(func() error {
		tx, err = c.cutBase.BeginTx(ctx, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return cutTx{tx, c.ctl}, nil
}

// ExecContext and QueryContext count a statement that the driver runs
// itself, and also one it leaves to a prepared statement (driver.ErrSkip),
// which counts again there: every boundary is cut at some count.
func (c *cutConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (r driver.Result, err error) {
	err = c.ctl.statement(func() error {
		r, err = c.cutBase.ExecContext(ctx, query, args)
		return err
	})
	return r, err
}

func (c *cutConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (rows driver.Rows, err error) {
	err = c.ctl.statement(func() error {
		rows, err = c.cutBase.QueryContext(ctx, query, args)
		return err
	})
	return rows, err
}

func (c *cutConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.cutBase.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return cutStmt{s.(cutStmtBase), c.ctl}, nil
}

type cutStmtBase interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type cutStmt struct {
	cutStmtBase
	ctl *cutter
}

func (s cutStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (r driver.Result, err error) {
	err = s.ctl.statement(func() error {
		r, err = s.cutStmtBase.ExecContext(ctx, args)
		return err
	})
	return r, err
}

func (s cutStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (rows driver.Rows, err error) {
	err = s.ctl.statement(func() error {
		rows, err = s.cutStmtBase.QueryContext(ctx, args)
		return err
	})
	return rows, err
}

type cutTx struct {
	driver.Tx
	ctl *cutter
}

func (t cutTx) Commit() error { return t.ctl.statement(t.Tx.Commit) }
