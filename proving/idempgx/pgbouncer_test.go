package idempgx_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestPgBouncerPreparedStatements is proving/dialect's test of the same
// name on pgx's pools: two pools of one connection each call DoTx, one
// after the other, through PgBouncer's pool of one server connection, so
// that both transactions run in one server session. With pgx's default query exec
// mode the second pool's pgx prepares the statement names that the first
// one's prepared there, and PostgreSQL refuses (SQLSTATE 42P05), with the
// Store's hint; in exec and simple_protocol mode both pools claim their keys,
// DoTx's pipelined BEGIN, claim, completion and COMMIT included.
func TestPgBouncerPreparedStatements(t *testing.T) {
	if dbtest.PgBouncerDSN() == "" {
		t.Skip(dbtest.SkipPgBouncerReason)
	}
	for _, c := range dbtest.PgxExecModes {
		t.Run(dbtest.PgxExecModeName(c.Mode), func(t *testing.T) {
			// The Store's tables, created through the big pool.
			e := setupOn(t, dbtest.WithParams(dbtest.PgBouncerDSN(), dbtest.PgxPoolerParams), 1)
			single := dbtest.PgBouncerSingleSession(t, "pgx")
			source := single
			if c.Mode != "" {
				source = dbtest.WithParams(single, "default_query_exec_mode="+c.Mode)
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
			if !c.Fails {
				claimed(t, res, err)
				res, err = pg.DoTx(ctx, pools[0], pgx.TxOptions{}, "k2", hashA, e.effect("k2", created))
				claimed(t, res, err)
				return
			}
			dbtest.WantPreparedStatementClash(t, err, e.EffectCount(t, "k1"))
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
