package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestConformance runs the whole contract of Do on every database the tests
// reach, through each built-in dialect, on PostgreSQL behind PgBouncer, on
// Vitess's sharded keyspace, and on Citus through its coordinator.
func TestConformance(t *testing.T) {
	conform := func(t *testing.T, tg target) {
		idemtest.TestDialect(t, tg.Dialect, func(t *testing.T) *sql.DB { return tg.Open(t) })
	}
	dbtest.ForEachPooled(t, conform)
	for _, tg := range dbtest.VitessWithSettings() {
		t.Run(tg.Name, func(t *testing.T) { conform(t, tg) })
	}
	dbtest.SkipMissingVitess(t)
	dbtest.ForEachCitus(t, conform)
}

// TestPostgresReplayWritesNothing shows that a replay does not even give its
// transaction an id, which PostgreSQL assigns at the first write.
func TestPostgresReplayWritesNothing(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only")
		}
		e := setup(t, tg)
		ctx := context.Background()
		res, err := e.Do(t, "k", dbtest.HashA, e.Effect("k", dbtest.Created), true)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		tx := e.Begin(t, nil)
		res, err = e.Store.Do(ctx, tx, "k", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		var xid sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT txid_current_if_assigned()").Scan(&xid); err != nil {
			t.Fatal(err)
		}
		if xid.Valid {
			t.Errorf("the replay wrote: its transaction has id %d", xid.Int64)
		}
	})
}

func TestRefuseWithoutRefusable(t *testing.T) {
	e := setup(t, dbtest.SQLite(""))
	refuse := func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{}, idem.Refuse(idem.Response{Status: 402})
	}
	if _, err := e.Do(t, "k", dbtest.HashA, refuse, true); err == nil || !strings.Contains(err.Error(), "Refusable") {
		t.Errorf("Do = %v, want an error that names Refusable", err)
	}
	if _, err := e.Store.Lookup(context.Background(), e.DB, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup: %v, want ErrNotFound", err)
	}
}

func TestMigrateTwice(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		if err := e.Store.Migrate(context.Background(), e.DB); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		if len(e.Store.Schema()) == 0 {
			t.Fatal("empty Schema")
		}
	})
}
