package idempgx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/internal/dbtest"
)

// TestPgBouncerPreparedStatements is the root's test of the same name on
// pgx's pools: two pools of one connection each call DoTx, one after the
// other, through PgBouncer's pool of one server connection, so that both
// transactions run in one server session. With pgx's default query exec
// mode the second pool's pgx prepares the statement names that the first
// one's prepared there, and PostgreSQL refuses (SQLSTATE 42P05), with the
// Store's hint; in exec and simple_protocol mode both pools claim their keys,
// DoTx's pipelined BEGIN, claim, completion and COMMIT included.
func TestPgBouncerPreparedStatements(t *testing.T) {
	if dbtest.PgBouncerDSN() == "" {
		t.Skip(dbtest.SkipPgBouncerReason)
	}
	for _, c := range []struct {
		mode  string // default_query_exec_mode, "" for pgx's default
		fails bool
	}{
		{mode: "", fails: true},
		{mode: "exec"},
		{mode: "simple_protocol"},
	} {
		name := c.mode
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			// The Store's tables, created through the big pool.
			e := setupOn(t, dbtest.WithParams(dbtest.PgBouncerDSN(), dbtest.PgxPoolerParams), 1)
			single := dbtest.PgBouncerSingleSession(t, "pgx")
			source := single
			if c.mode != "" {
				source = dbtest.WithParams(single, "default_query_exec_mode="+c.mode)
			}
			ctx := context.Background()
			var pools [2]*pgxpool.Pool
			for i := range pools {
				cfg, err := pgxpool.ParseConfig(source)
				if err != nil {
					t.Fatal(err)
				}
				cfg.MaxConns = 1
				pool, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pool.Close)
				pools[i] = pool
			}
			pg := idempgx.New(e.Store)
			res, err := pg.DoTx(ctx, pools[0], pgx.TxOptions{}, "k0", hashA, e.effect("k0", created))
			claimed(t, res, err)
			res, err = pg.DoTx(ctx, pools[1], pgx.TxOptions{}, "k1", hashA, e.effect("k1", created))
			if !c.fails {
				claimed(t, res, err)
				res, err = pg.DoTx(ctx, pools[0], pgx.TxOptions{}, "k2", hashA, e.effect("k2", created))
				claimed(t, res, err)
				return
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42P05" {
				t.Fatalf("the second pool's DoTx: %v, %v; want SQLSTATE 42P05 (prepared statement already exists)", res.Outcome, err)
			}
			if !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
				t.Errorf("the error does not say what to set: %v", err)
			}
			t.Log(err)
			if n := e.EffectCount(t, "k1"); n != 0 {
				t.Errorf("the failed request left %d effects", n)
			}
		})
	}
}

// claimed fails t unless DoTx claimed the key.
func claimed(t *testing.T, res idem.Result, err error) {
	t.Helper()
	if err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("DoTx = %v, %v; want %v", res.Outcome, err, idem.Claimed)
	}
}
