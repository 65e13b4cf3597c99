package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

// effects is a table of the effects that the tests' requests have, one row
// per run, so that a test can tell whether a request ran again.
type effects struct {
	*dbtest.Effects
	tb *testDB
}

func newEffects(t *testing.T, tb *testDB) *effects {
	t.Helper()
	return &effects{Effects: dbtest.NewEffects(t, tb.Dialect, tb.db, tb.table+"_fx"), tb: tb}
}

// stuck leaves key unfinished, as a handler does that commits its
// transaction itself, with its effect written or not, before the response
// is stored: DoTx fails with ErrTxEnded, and the record stays in flight.
func (fx *effects) stuck(t *testing.T, s *idem.Store, key string, withEffect bool) {
	t.Helper()
	_, err := s.DoTx(context.Background(), fx.tb.db, nil, key, idem.Fingerprint([]byte(key)), func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if withEffect {
			if err := fx.Insert(ctx, tx, key, "ran"); err != nil {
				return idem.Response{}, err
			}
		}
		return idem.Response{Status: 201}, tx.Commit()
	})
	if !errors.Is(err, idem.ErrTxEnded) {
		t.Fatalf("DoTx with a Func that commits = %v, want ErrTxEnded", err)
	}
	res, err := s.Lookup(context.Background(), fx.tb.db, key)
	if err != nil || res.Outcome != idem.InFlight {
		t.Fatalf("Lookup of a stuck key = %v, %v; want in flight", res.Outcome, err)
	}
}

// retry sends the request with key again through DoTx, as the client's
// retry would, with the effect as its work.
func (fx *effects) retry(t *testing.T, s *idem.Store, key string) idem.Result {
	t.Helper()
	res, err := s.DoTx(context.Background(), fx.tb.db, nil, key, idem.Fingerprint([]byte(key)), func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		return idem.Response{Status: 201, Body: []byte("ran again")}, fx.Insert(ctx, tx, key, "ran")
	})
	if err != nil {
		t.Fatalf("retry of %s: %v", key, err)
	}
	return res
}

// hold claims key in a transaction that stays open until the test ends or
// calls the returned function. On SQLite the transaction holds the whole
// database's write lock.
func hold(t *testing.T, tb *testDB, s *idem.Store, key string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := tb.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Do(ctx, tx, key, idem.Fingerprint([]byte(key)), func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{Status: 201}, nil
	})
	if err != nil || res.Outcome != idem.Claimed {
		tx.Rollback()
		t.Fatalf("claim of %s: %v, %v", key, res.Outcome, err)
	}
	release = func() { tx.Rollback() }
	t.Cleanup(release)
	return release
}

// heldArgs returns the database flags for a command that meets a held key.
// Where one writer holds the whole database, as on SQLite, the command waits
// at BEGIN for the busy timeout, so the DSN sets a short one.
func heldArgs(tb *testDB, more ...string) []string {
	if tb.busyDSN != nil {
		return tb.args(append([]string{"-dsn", tb.busyDSN(tb.dsn)}, more...)...)
	}
	return tb.args(more...)
}

// wantHeld checks the one line that settle and release print for a key
// that a live request holds.
func wantHeld(t *testing.T, tb *testDB, r result, key string) {
	t.Helper()
	r.wantCode(t, exitHeld)
	want := `idem: a live request holds key "` + key + `": it is still running, and will finish or give up by itself; try again later`
	if dialect.CapabilitiesOf(tb.Dialect).OneWriter {
		// The holder holds the whole database.
		want = `idem: the ` + tb.Dialect.Name() + ` database is busy, perhaps with the request that holds key "` + key + `"; try again later (`
	}
	if !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Errorf("stdout %q, stderr %q; want one line starting %q", r.stdout, r.stderr, want)
	}
}

// wantError checks a one-line error and its exit status, with nothing on
// stdout.
func wantError(t *testing.T, r result, code int, msg string) {
	t.Helper()
	r.wantCode(t, code)
	if r.stderr != msg+"\n" || r.stdout != "" {
		t.Errorf("stdout %q, stderr %q; want stderr %q", r.stdout, r.stderr, msg+"\n")
	}
}

func sameResponse(t *testing.T, got, want idem.Response) {
	t.Helper()
	if got.Status != want.Status || !reflect.DeepEqual(got.Header, want.Header) || !bytes.Equal(got.Body, want.Body) {
		t.Errorf("response %d %v %q, want %d %v %q", got.Status, got.Header, got.Body, want.Status, want.Header, want.Body)
	}
}

func TestSettle(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		store := tb.store(t, idem.WithClock(func() time.Time { return t0 }))
		fx := newEffects(t, tb)
		e := testEnv(t0.Add(3 * time.Minute))
		settle := func(t *testing.T, more ...string) result {
			t.Helper()
			return runWith(t, e, append([]string{"settle"}, tb.args(more...)...)...)
		}

		t.Run("Stuck", func(t *testing.T) {
			fx.stuck(t, store, "order-1", true)
			r := settle(t, "-key", "order-1", "-status", "201",
				"-header", "content-type: application/json", "-header", "Location:/orders/1", "-body", `{"order":1}`)
			r.wantCode(t, exitOK)
			equalLines(t, r.stdout,
				`key      "order-1"`,
				`state    settled: a retry of the request now gets this response back`,
				`status   201 Created`,
				`header   Content-Type: application/json`,
				`         Location: /orders/1`,
				`size     header 53 bytes, body 11 bytes`)

			// The retry replays the settled response and does not run.
			res := fx.retry(t, store, "order-1")
			if res.Outcome != idem.Replay {
				t.Fatalf("retry after settle: %v, want replay", res.Outcome)
			}
			sameResponse(t, res.Response, idem.Response{
				Status: 201,
				Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/1"}},
				Body:   []byte(`{"order":1}`),
			})
			if n := fx.Count(t, "order-1"); n != 1 {
				t.Errorf("%d effects of order-1, want the 1 that the stuck request committed", n)
			}

			// Now it has finished, and neither command touches it again.
			wantError(t, settle(t, "-key", "order-1", "-status", "500"), exitFinished,
				`idem: key "order-1" has finished: retries get its stored response (idem inspect shows it), and there is nothing to settle`)
			r = runWith(t, e, append([]string{"release"}, tb.args("-key", "order-1", "-no-effect")...)...)
			wantError(t, r, exitFinished,
				`idem: key "order-1" has finished: retries get its stored response (idem inspect shows it), and there is nothing to release`)
			res, err := store.Lookup(context.Background(), tb.db, "order-1")
			if err != nil || res.Response.Status != 201 {
				t.Errorf("Lookup after the refusals: %d, %v; want the settled 201", res.Response.Status, err)
			}
		})

		t.Run("BodyFile", func(t *testing.T) {
			fx.stuck(t, store, "order-2", true)
			body := []byte("\x00\x01binary\xff")
			path := filepath.Join(t.TempDir(), "body")
			if err := os.WriteFile(path, body, 0o600); err != nil {
				t.Fatal(err)
			}
			r := settle(t, "-key", "order-2", "-status", "200", "-body-file", path)
			r.wantCode(t, exitOK)
			equalLines(t, r.stdout,
				`key      "order-2"`,
				`state    settled: a retry of the request now gets this response back`,
				`status   200 OK`,
				`header   (none)`,
				`size     header 0 bytes, body 9 bytes`)
			res := fx.retry(t, store, "order-2")
			if res.Outcome != idem.Replay {
				t.Fatalf("retry after settle: %v, want replay", res.Outcome)
			}
			sameResponse(t, res.Response, idem.Response{Status: 200, Body: body})
		})

		t.Run("NotFound", func(t *testing.T) {
			wantError(t, settle(t, "-key", "never-sent", "-status", "201"), exitNotFound,
				`idem: no live record for key "never-sent": it was never committed, it expired, or it was purged; nothing to settle (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
			if _, err := store.Lookup(context.Background(), tb.db, "never-sent"); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("settle of a missing key left a record: %v", err)
			}
		})

		t.Run("Scoped", func(t *testing.T) {
			stored := idemhttp.StoredKey("acct_42", "order-9")
			fx.stuck(t, store, stored, true)
			wantError(t, settle(t, "-key", "order-9", "-status", "201"), exitNotFound,
				`idem: no live record for key "order-9": it was never committed, it expired, or it was purged; nothing to settle (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
			wantError(t, settle(t, "-scope", "acct_43", "-key", "order-9", "-status", "201"), exitNotFound,
				`idem: no live record for key "order-9" in scope "acct_43": it was never committed, it expired, or it was purged; nothing to settle (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
			r := settle(t, "-scope", "acct_42", "-key", "order-9", "-status", "201", "-body", `{"order":9}`)
			r.wantCode(t, exitOK)
			if !strings.HasPrefix(r.stdout, `key      "`+stored+`"`+"\n") {
				t.Errorf("settle -scope shows:\n%s", r.stdout)
			}
			res := fx.retry(t, store, stored)
			if res.Outcome != idem.Replay {
				t.Fatalf("retry after settle: %v, want replay", res.Outcome)
			}
			sameResponse(t, res.Response, idem.Response{Status: 201, Body: []byte(`{"order":9}`)})
		})

		t.Run("Held", func(t *testing.T) {
			done := hold(t, tb, store, "order-3")
			r := runWith(t, e, append([]string{"settle"}, heldArgs(tb, "-key", "order-3", "-status", "201")...)...)
			wantHeld(t, tb, r, "order-3")
			done()
			if _, err := store.Lookup(context.Background(), tb.db, "order-3"); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("after the holder rolled back: %v, want no record", err)
			}
		})
	})
}
