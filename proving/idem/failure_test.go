package idem_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// killSession ends the database session of tx from another connection, as
// an administrator or a failover would.
func (e *env) killSession(t *testing.T, tx *sql.Tx) {
	t.Helper()
	ctx := context.Background()
	var id int64
	switch e.tg.Family {
	case "postgres":
		if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, "SELECT pg_terminate_backend($1)", id); err != nil {
			t.Fatal(err)
		}
	case "mysql":
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDroppedConnection ends the claiming transaction's session on the
// server, inside fn and before the commit: the call or the commit fails,
// nothing is half-written, and the retry succeeds.
func TestDroppedConnection(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family == "sqlite" {
			t.Skip("SQLite has no server session to end")
		}
		ctx := context.Background()
		for _, inFn := range []bool{true, false} {
			name := "before the commit"
			if inFn {
				name = "inside fn"
			}
			t.Run(name, func(t *testing.T) {
				// The server ends the killed session's transaction, and
				// frees its claim, on its own time: the DoTx below may
				// start while it is still at it, and then waits for the
				// claim. That takes milliseconds, even on a loaded
				// machine; a claim the server never freed would hold the
				// key for good, and DoTx would answer InFlight after the
				// lock timeout. 10 s, rather than the default second,
				// leaves the server all the room a busy machine needs.
				e := setup(t, tg, idem.WithLockTimeout(10*time.Second))
				tx := e.Begin(t, nil)
				_, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					if inFn {
						e.killSession(t, tx)
					}
					return e.Effect("k", dbtest.Created)(ctx, tx)
				})
				if !inFn {
					if err != nil {
						t.Fatal(err)
					}
					e.killSession(t, tx)
					err = tx.Commit()
				}
				if err == nil {
					t.Fatal("the call and the commit succeeded on a dropped connection")
				}
				_ = tx.Rollback()
				if _, err := e.Store.Lookup(ctx, e.DB, "k"); !errors.Is(err, idem.ErrNotFound) {
					t.Errorf("Lookup: %v, want ErrNotFound: nothing half-written", err)
				}
				if n := e.EffectCount(t, "k"); n != 0 {
					t.Errorf("%d effect rows left behind", n)
				}
				res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, e.Effect("k", dbtest.Created))
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				if n := e.EffectCount(t, "k"); n != 1 {
					t.Errorf("%d effect rows, want 1", n)
				}
			})
		}
	})
}

// cutProxy is a TCP proxy that can cut a connection at its next COMMIT:
// after passing the COMMIT on, so that the server commits but its reply is
// lost, or before, so that nothing commits and the client cannot tell; or it
// cuts the client off and holds the COMMIT back until another connection
// sends an INSERT, so that the commit lands after the client gave up on it.
type cutProxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	wg     sync.WaitGroup
	// insert is closed at the first claim (an INSERT, or MySQL's CALL)
	// that a connection other than the cut one sends after a
	// cutLateCommit.
	insert    chan struct{}
	insertOne sync.Once
	holding   atomic.Bool
}

const (
	cutNothing = iota
	cutAfterCommit
	cutBeforeCommit
	cutLateCommit
)

func startProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, insert: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.wg.Add(2)
		replied := make(chan struct{})
		go func() { // server to client, as it is
			defer p.wg.Done()
			defer close(replied)
			_, _ = io.Copy(client, server)
			client.Close()
		}()
		go func() { // client to server, watching for COMMIT
			defer p.wg.Done()
			defer server.Close()
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					chunk := buf[:n]
					if p.holding.Load() && isClaim(chunk) {
						p.insertOne.Do(func() { close(p.insert) })
					}
					mode := p.mode.Load()
					commit := mode != cutNothing && bytes.Contains(bytes.ToLower(chunk), []byte("commit"))
					if commit && p.mode.CompareAndSwap(mode, cutNothing) && mode == cutBeforeCommit {
						return
					}
					if commit {
						p.commitCut(client, server, chunk, replied, mode == cutLateCommit)
						return
					}
					if _, werr := server.Write(chunk); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// isClaim reports whether chunk, sent by a client, holds a claim: an INSERT,
// or the CALL of MySQL's claim procedure.
func isClaim(chunk []byte) bool {
	c := bytes.ToLower(chunk)
	return bytes.Contains(c, []byte("insert")) || bytes.Contains(c, []byte("call "))
}

// commitCut cuts the client off, so that no reply can reach it, then
// passes the COMMIT on and waits for the server to answer it. With late, it
// first waits for another connection's claim (that of the client's next
// attempt, sent after it looked the key up and found nothing). The
// waits are bounded so that a test that goes wrong ends.
func (p *cutProxy) commitCut(client, server net.Conn, commit []byte, replied <-chan struct{}, late bool) {
	client.Close()
	if late {
		p.holding.Store(true)
		select {
		case <-p.insert:
		case <-time.After(30 * time.Second):
		}
	}
	if _, err := server.Write(commit); err != nil {
		return
	}
	select {
	case <-replied:
	case <-time.After(30 * time.Second):
	}
}

// proxied opens e's database through a cutProxy of its own, closed at the
// end of t.
func (e *env) proxied(t *testing.T) (*cutProxy, *sql.DB) {
	t.Helper()
	var p *cutProxy
	dsn := throughProxy(t, e.tg, e.DSN, func(target string) string {
		p = startProxy(t, target)
		return p.ln.Addr().String()
	})
	db, err := sql.Open(e.tg.Driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return p, db
}

// throughProxy returns tg's data source with the server's address replaced by
// the proxy's, and the server's address.
func throughProxy(t *testing.T, tg target, dsn string, proxy func(target string) string) string {
	t.Helper()
	switch tg.Family {
	case "postgres":
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = proxy(u.Host)
		return u.String()
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Addr = proxy(cfg.Addr)
		return cfg.FormatDSN()
	}
	t.Fatalf("no proxy for %s", tg.Family)
	return ""
}

// TestLostCommitReplyOverTCP puts a TCP proxy between DoTx and the server
// that cuts the connection at the COMMIT, after or before passing it on. DoTx
// must find out from the database what happened, and leave one effect.
func TestLostCommitReplyOverTCP(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family == "sqlite" {
			t.Skip("SQLite has no network between the client and the database")
		}
		for _, c := range []struct {
			name string
			mode int32
			runs int // times fn must run
		}{
			{"the server committed", cutAfterCommit, 1},
			{"the commit never arrived", cutBeforeCommit, 2},
			// The commit lands after DoTx looked the key up and found
			// nothing: the next attempt's claim waits for the first
			// one's session, then finds its record, which is this
			// request's own, and answers Claimed, not Replay, without
			// running fn again.
			{"the commit landed after the lookup", cutLateCommit, 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				// When the proxy cuts the connection before the COMMIT,
				// the server rolls the session back once it sees the
				// connection closed, and DoTx's second attempt may wait
				// for that session's claim meanwhile: milliseconds, even
				// on a loaded machine, while a claim the server never
				// freed would make DoTx answer InFlight after the lock
				// timeout. 10 s, rather than the default second, leaves
				// the server all the room a busy machine needs.
				e := setup(t, tg, idem.WithLockTimeout(10*time.Second))
				p, db := e.proxied(t)
				runs := 0
				res, err := e.Store.DoTx(context.Background(), db, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					runs++
					if runs == 1 {
						p.mode.Store(c.mode)
					}
					return e.Effect("k", dbtest.Created)(ctx, tx)
				})
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				dbtest.SameResponse(t, res.Response, dbtest.Created)
				if runs != c.runs {
					t.Errorf("fn ran %d times, want %d", runs, c.runs)
				}
				if p.mode.Load() != cutNothing {
					t.Error("the proxy never saw the COMMIT")
				}
				if n := e.EffectCount(t, "k"); n != 1 {
					t.Errorf("%d effect rows, want 1", n)
				}
			})
		}
	})
}

// TestPostgresLockTimeoutUntouched shows that the claim sets no lock timeout
// that could leak into the rest of the caller's transaction or into the
// pooled session, whatever the outcome.
func TestPostgresLockTimeoutUntouched(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only")
		}
		// The claim of "held" waits the 100 ms lock timeout for a holder
		// that ends only after the loop, and answers InFlight however
		// long load makes that wait; the other claims wait for nothing.
		e := setup(t, tg, idem.WithLockTimeout(100*time.Millisecond))
		e.DB.SetMaxOpenConns(2)
		ctx := context.Background()
		show := func(q interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		}) string {
			var v string
			if err := q.QueryRowContext(ctx, "SHOW lock_timeout").Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		holder := e.Hold(t, "held", dbtest.HashA, dbtest.Created)
		for _, c := range []struct {
			key  string
			want idem.Outcome
		}{{"k", idem.Claimed}, {"k", idem.Replay}, {"held", idem.InFlight}} {
			tx := e.Begin(t, nil)
			if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '7s'"); err != nil {
				t.Fatal(err)
			}
			res, err := e.Store.Do(ctx, tx, c.key, dbtest.HashA, e.Effect(c.key, dbtest.Created))
			dbtest.WantOutcome(t, res, err, c.want)
			if got := show(tx); got != "7s" {
				t.Errorf("%v: lock_timeout in the caller's transaction is %q, want the caller's 7s", c.want, got)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := show(e.DB); got != "0" {
				t.Errorf("%v: lock_timeout of the pooled session is %q, want 0", c.want, got)
			}
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSQLiteWithoutRecommendedDSN opens SQLite without _txlock=immediate and
// with a short busy timeout, the way many services do: concurrent writers
// get ErrRetry, DoTx gets them through, and no outcome is ever wrong. The
// 20 ms busy timeout bounds nothing the test checks: on a loaded machine
// more attempts run out of it, and a call whose attempts all do is counted,
// not failed.
func TestSQLiteWithoutRecommendedDSN(t *testing.T) {
	for _, params := range []string{"_pragma=busy_timeout(20)", "_pragma=busy_timeout(20)&_pragma=journal_mode(WAL)"} {
		t.Run(params, func(t *testing.T) {
			e := setup(t, dbtest.SQLite(params))
			ctx := context.Background()
			const workers, keys = 16, 8
			var (
				wg                 sync.WaitGroup
				claimed, exhausted atomic.Int32
			)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < keys; k++ {
						key := fmt.Sprintf("key-%d", (k+w)%keys)
						fn := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
							// Read first, as handlers do: the write that
							// follows is where SQLite refuses.
							var n int
							if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+e.Effects.Table).Scan(&n); err != nil {
								return idem.Response{}, err
							}
							return e.Effect(key, dbtest.Created)(ctx, tx)
						}
						res, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, fn)
						switch {
						case errors.Is(err, idem.ErrRetry):
							exhausted.Add(1)
						case err != nil:
							t.Errorf("DoTx(%s): %v, want an outcome or ErrRetry", key, err)
						case res.Outcome == idem.Claimed:
							claimed.Add(1)
						case res.Outcome != idem.Replay:
							t.Errorf("DoTx(%s) = %v", key, res.Outcome)
						}
					}
				}()
			}
			wg.Wait()
			for k := 0; k < keys; k++ {
				if n := e.EffectCount(t, fmt.Sprintf("key-%d", k)); n > 1 {
					t.Errorf("key-%d: %d effect rows", k, n)
				}
			}
			if claimed.Load() > keys {
				t.Errorf("%d claims for %d keys", claimed.Load(), keys)
			}
			t.Logf("%d calls: %d claimed, %d still busy after DoTx's attempts", workers*keys, claimed.Load(), exhausted.Load())
		})
	}
}
