package idem_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/dbtest"
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
			e := setup(t, dbtest.PgBouncerTargets()[0])
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
			res, err := e.Store.DoTx(ctx, clients[0], nil, "k0", hashA, e.Effect("k0", created))
			wantOutcome(t, res, err, idem.Claimed)
			res, err = e.Store.DoTx(ctx, clients[1], nil, "k1", hashA, e.Effect("k1", created))
			if !c.Fails {
				wantOutcome(t, res, err, idem.Claimed)
				// And the first client again, on the session the second
				// used last.
				res, err = e.Store.DoTx(ctx, clients[0], nil, "k2", hashA, e.Effect("k2", created))
				wantOutcome(t, res, err, idem.Claimed)
				return
			}
			dbtest.WantPreparedStatementClash(t, err, e.EffectCount(t, "k1"))
		})
	}
}
