package idem_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// rowsOnly is a Querier of the caller's own, which has QueryRowContext and
// nothing else that Lookup could use.
type rowsOnly struct{ db *sql.DB }

func (r rowsOnly) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return r.db.QueryRowContext(ctx, query, args...)
}

// TestLookupThroughEachQuerier reads one record through each kind of
// Querier: the *sql.Tx that claimed it reads it before the commit, which
// the *sql.DB does not, and once committed the *sql.DB, a *sql.Conn and a
// Querier of the caller's own, with QueryRowContext alone, replay it. A nil
// pointer of the caller's type is refused, as a nil *sql.DB is.
func TestLookupThroughEachQuerier(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		ctx := context.Background()
		resp := idem.Response{Status: 201, Body: []byte("made")}
		replays := func(t *testing.T, through string, q idem.Querier) {
			t.Helper()
			res, err := e.Store.Lookup(ctx, q, "k")
			if err != nil || res.Outcome != idem.Replay || res.Response.Status != resp.Status || !bytes.Equal(res.Response.Body, resp.Body) {
				t.Errorf("Lookup through %s = %v %+v, %v; want Replay of %+v", through, res.Outcome, res.Response, err, resp)
			}
		}

		tx := e.Begin(t, nil)
		res, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, e.Effect("k", resp))
		if err != nil || res.Outcome != idem.Claimed {
			t.Fatalf("Do = %v, %v; want Claimed", res.Outcome, err)
		}
		replays(t, "the *sql.Tx that claimed it", tx)
		if res, err := e.Store.Lookup(ctx, e.DB, "k"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup through the *sql.DB before the commit = %v, %v; want ErrNotFound", res.Outcome, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}

		replays(t, "the *sql.DB", e.DB)
		conn, err := e.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		replays(t, "a *sql.Conn", conn)
		replays(t, "a Querier with QueryRowContext alone", rowsOnly{e.DB})
		if _, err := e.Store.Lookup(ctx, (*rowsOnly)(nil), "k"); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Lookup through a nil *rowsOnly: %v, want ErrInvalidArgument", err)
		}
	})
}
