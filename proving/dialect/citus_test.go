package dialect_test

import (
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestCitusEffectsOnTheKeysWorker shows that the tests' set-up on Citus
// distributes the effect table in the co-location group of idem's table,
// as docs/scaling.md tells a user to: a request's record and its effect are
// on one shard placement, so the request's transaction stays on one worker.
func TestCitusEffectsOnTheKeysWorker(t *testing.T) {
	dbtest.ForEachCitus(t, func(t *testing.T, tg dbtest.Target) {
		e := tg.Setup(t)
		res, err := e.Do(t, "order-1", dbtest.HashA, e.Effect("order-1", dbtest.Created), true)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		var sameGroup bool
		if err := e.DB.QueryRow(`SELECT count(DISTINCT colocationid) = 1 FROM pg_dist_partition WHERE logicalrelid IN ($1::regclass, $2::regclass)`,
			e.Table, e.Effects.Table).Scan(&sameGroup); err != nil {
			t.Fatal(err)
		}
		if !sameGroup {
			t.Errorf("%s and %s are in different co-location groups", e.Table, e.Effects.Table)
		}
		var record, effect string
		place := `SELECT nodename || ':' || nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column($1, $2::bytea)`
		if err := e.DB.QueryRow(place, e.Table, []byte("order-1")).Scan(&record); err != nil {
			t.Fatal(err)
		}
		if err := e.DB.QueryRow(place, e.Effects.Table, []byte("order-1")).Scan(&effect); err != nil {
			t.Fatal(err)
		}
		if record != effect {
			t.Errorf("the record of order-1 is on %s and its effect on %s, want one worker", record, effect)
		}
		if n := e.EffectCount(t, "order-1"); n != 1 {
			t.Errorf("%d effects of order-1, want 1", n)
		}
	})
}
