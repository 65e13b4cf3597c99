package idem_test

import (
	"context"
	"testing"

	"github.com/idemgo/idem/proving/dbtest"
)

// TestPurgeBatchLargerThanLockTable shows that Purge deletes every expired
// record whatever batch it is given, also one larger than PostgreSQL's
// shared lock table: a batch takes the claim's advisory lock of each of its
// keys until it commits, and a transaction that takes more locks than the
// table has room for fails with "out of shared memory" (53200), deleting
// nothing. The test servers' table has room for about 13,500 entries
// (max_locks_per_transaction 64 for some 210 processes), and the server
// lends a full table some more of its shared memory: a batch of 40,000 in
// one transaction fails there, so Purge bounds each transaction's batch
// (Capabilities.MaxPurgeBatch).
func TestPurgeBatchLargerThanLockTable(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("the shared lock table that advisory locks fill is PostgreSQL's")
		}
		e := setup(t, tg)
		const n = 40000
		_, err := e.DB.Exec(`INSERT INTO `+dbtest.QuoteName(tg.Family, e.Table)+` (key, request_hash, created_at, expires_at, token)
SELECT convert_to('expired-' || g, 'UTF8'), '\x00'::bytea, 0, 1, g FROM generate_series(1, $1::int) AS g`, n)
		if err != nil {
			t.Fatal(err)
		}
		deleted, err := e.Store.Purge(context.Background(), e.DB, n)
		if err != nil {
			t.Fatalf("Purge with a batch of %d: %v (after deleting %d)", n, err, deleted)
		}
		if deleted != n {
			t.Errorf("Purge deleted %d records, want %d", deleted, n)
		}
		if keys := dbtest.StoredKeys(t, e.Env, e.tg.Family); len(keys) != 0 {
			t.Errorf("%d records left after Purge, want none", len(keys))
		}
	})
}
