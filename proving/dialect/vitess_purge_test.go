package dialect_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestVitessPurgeShardByShard shows Store.Purge through vtgate with
// transaction_mode SINGLE: it purges each shard in turn, on one connection
// targeted at it, each batch a transaction on one shard; it deletes every
// expired record but those taken over while it runs, and never a live one:
// not a record that a request has taken over and holds, uncommitted, on
// each shard, which Purge neither waits for nor deletes, and not one taken
// over and committed on the shard still to come while a batch holds its
// records between its select and its delete. The connection it targeted
// never serves anyone else: on a pool of one connection, the next
// statement is routed by key again.
func TestVitessPurgeShardByShard(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		var (
			c      dbtest.Clock
			mu     sync.Mutex
			during func(keys [][]byte) // what a test does inside each batch
		)
		held := func(keys [][]byte) {
			mu.Lock()
			f := during
			mu.Unlock()
			if f != nil {
				f(keys)
			}
		}
		e := dbtest.PurgeHeld(tg, held).Setup(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
		ctx := context.Background()

		// 24 expired records, on both shards.
		c.Advance(-3 * time.Hour)
		shardOf := map[string]string{}
		byShard := map[string][]string{}
		for i := range 24 {
			key := fmt.Sprintf("k-%02d", i)
			res, err := e.Do(t, key, dbtest.HashA, e.Effect(key, dbtest.Created), true)
			dbtest.WantOutcome(t, res, err, idem.Claimed)
			shard, err := dbtest.ShardOf(ctx, e.DB, []byte(key))
			if err != nil {
				t.Fatal(err)
			}
			shardOf[key] = shard
			byShard[shard] = append(byShard[shard], key)
		}
		if len(byShard) != 2 {
			t.Fatalf("the keys are on %d shards, want both: %v", len(byShard), byShard)
		}
		for shard, keys := range byShard {
			if len(keys) < 4 {
				t.Fatalf("shard %s has %d keys, want at least 4", shard, len(keys))
			}
		}
		c.Advance(3 * time.Hour)

		// On each shard a request takes an expired record over and holds
		// it while Purge runs.
		live := map[string]bool{}
		var holders []*sql.Tx
		for _, keys := range byShard {
			key := keys[1]
			holders = append(holders, e.Hold(t, key, dbtest.HashB, dbtest.Replayed))
			live[key] = true
		}

		// Inside the first batch, which holds its records, a request takes
		// over and commits a record on the other shard.
		var batches [][]string
		during = func(keys [][]byte) {
			var batch []string
			for _, k := range keys {
				batch = append(batch, string(k))
			}
			batches = append(batches, batch)
			if len(batches) > 1 {
				return
			}
			for shard, keys := range byShard {
				if shard == shardOf[batch[0]] {
					continue
				}
				key := keys[len(keys)-1]
				res, err := e.Do(t, key, dbtest.HashB, e.Effect(key, dbtest.Replayed), true)
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				live[key] = true
			}
		}

		// Purge on a pool of one connection: what it leaves on that
		// connection is what the next caller gets.
		db := tg.Open(t)
		db.SetMaxOpenConns(1)
		n, err := e.Store.Purge(ctx, db, 8)
		if err != nil {
			t.Fatalf("Purge: %v (it must neither wait for the held records nor meet a second shard)", err)
		}
		mu.Lock()
		during = nil
		mu.Unlock()

		if want := int64(24 - len(live)); n != want {
			t.Errorf("Purge deleted %d records, want %d: every expired record but the %d taken over", n, want, len(live))
		}
		if len(batches) < 4 {
			t.Errorf("%d batches, want at least two on each shard: %q", len(batches), batches)
		}
		for _, batch := range batches {
			for _, key := range batch {
				if shardOf[key] != shardOf[batch[0]] {
					t.Errorf("batch %q reads two shards", batch)
				}
				if live[key] {
					t.Errorf("batch %q holds %s, which a request took over", batch, key)
				}
			}
		}
		var target string
		if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&target); err != nil || target != "idem_test" {
			t.Errorf("after Purge, the pool's connection uses %q, %v; want idem_test, routed by key", target, err)
		}

		for _, holder := range holders {
			if err := holder.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		var want []string
		for key := range live {
			want = append(want, key)
		}
		slices.Sort(want)
		if got := dbtest.StoredKeys(t, e, tg.Family); !slices.Equal(got, want) {
			t.Errorf("records left: %q, want those taken over, %q", got, want)
		}
		for _, key := range want {
			if res, err := e.Store.Lookup(ctx, e.DB, key); err != nil || res.Response.Status != dbtest.Replayed.Status {
				t.Errorf("Lookup(%s) = %+v, %v; want the response of the request that took it over", key, res, err)
			}
		}
		// A later purge finds nothing more to delete.
		if n, err := e.Store.Purge(ctx, e.DB, 8); err != nil || n != 0 {
			t.Errorf("second Purge = %d, %v; want 0", n, err)
		}
	})
}

// TestVitessPurgeStatementsOnAShard shows what a session targeted at a
// shard takes of a purge's statements, and why the Vitess dialect's differ
// from MySQL's: vttablet's parser refuses MySQL's delete, whose FORCE INDEX
// it does not know; vtgate loses the value of a LIMIT placeholder of a
// prepared statement there; and the dialect's delete, with the optimizer
// hint INDEX in FORCE INDEX's place, finds its rows through the primary
// key, touching only the records of its batch, where MySQL's optimizer,
// left to itself, reads a small shard through the index on expires_at, and
// a locking read there would wait for the records that claims hold.
func TestVitessPurgeStatementsOnAShard(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		var c dbtest.Clock
		e := tg.Setup(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
		ctx := context.Background()
		c.Advance(-3 * time.Hour)
		byShard := map[string][]string{}
		for i := range 12 {
			key := fmt.Sprintf("k-%02d", i)
			res, err := e.Do(t, key, dbtest.HashA, e.Effect(key, dbtest.Created), true)
			dbtest.WantOutcome(t, res, err, idem.Claimed)
			shard, err := dbtest.ShardOf(ctx, e.DB, []byte(key))
			if err != nil {
				t.Fatal(err)
			}
			byShard[shard] = append(byShard[shard], fmt.Sprintf("0x%x", key))
		}
		now := strconv.FormatInt(time.Now().UnixMicro(), 10)
		vitessDelete := idem.Vitess().Statements(e.Table, 0).PurgeDelete
		plain := "DELETE FROM `" + e.Table + "` WHERE `key` IN ({keys}) AND expires_at <= {now}"
		conn, err := e.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Raw(func(any) error { return sqldriver.ErrBadConn }) // never pooled again, targeted
		unhinted := 0
		for shard, keys := range byShard {
			if _, err := conn.ExecContext(ctx, "USE `idem_test/"+shard+"`"); err != nil {
				t.Fatal(err)
			}
			index := func(stmt string) string {
				t.Helper()
				stmt = strings.NewReplacer("{keys}", strings.Join(keys, ", "), "{now}", now).Replace(stmt)
				rows, err := conn.QueryContext(ctx, "EXPLAIN FORMAT=TRADITIONAL "+stmt)
				if err != nil {
					t.Fatalf("EXPLAIN %s: %v", stmt, err)
				}
				defer rows.Close()
				cols, err := rows.Columns()
				if err != nil || !rows.Next() {
					t.Fatalf("EXPLAIN %s: no plan (%v)", stmt, err)
				}
				vals := make([]sql.NullString, len(cols))
				dest := make([]any, len(cols))
				for i := range vals {
					dest[i] = &vals[i]
				}
				if err := rows.Scan(dest...); err != nil {
					t.Fatal(err)
				}
				return vals[slices.Index(cols, "key")].String
			}
			mysqlDelete := strings.NewReplacer("{keys}", strings.Join(keys, ", "), "{now}", now).Replace(idem.MySQL().Statements(e.Table, 0).PurgeDelete)
			_, err := conn.ExecContext(ctx, mysqlDelete)
			if my := dbtest.VitessError(t, "MySQL's purge delete", err); my.Number != 1105 || !strings.Contains(my.Message, "syntax error") || !strings.Contains(my.Message, "force") {
				t.Errorf("MySQL's purge delete on shard %s: error %d %q, want vttablet's syntax error at FORCE", shard, my.Number, my.Message)
			}
			var k []byte
			err = conn.QueryRowContext(ctx, "SELECT `key` FROM `"+e.Table+"` WHERE expires_at <= ? ORDER BY expires_at LIMIT ?", now, 1).Scan(&k)
			if my := dbtest.VitessError(t, "a prepared LIMIT ?", err); my.Number != 1064 || !strings.Contains(my.Message, "null") {
				t.Errorf("a prepared LIMIT ? on shard %s: error %d %q, want 1064 near null", shard, my.Number, my.Message)
			}
			if got := index(vitessDelete); got != "PRIMARY" {
				t.Errorf("shard %s: the dialect's delete of all %d records reads index %q, want PRIMARY", shard, len(keys), got)
			}
			// With as many keys again that have no record, as a batch
			// has whose records went meanwhile, the optimizer reads the
			// shard's few expired records through expires_at instead.
			for i := range len(keys) {
				keys = append(keys, fmt.Sprintf("0x%x", fmt.Sprint("gone-", i)))
			}
			if got := index(vitessDelete); got != "PRIMARY" {
				t.Errorf("shard %s: the dialect's delete of %d keys reads index %q, want PRIMARY", shard, len(keys), got)
			}
			if got := index(plain); got != "PRIMARY" {
				unhinted++
			}
		}
		if unhinted == 0 {
			t.Error("the delete without the hint read the primary key on both shards: this test shows nothing")
		}
	})
}
