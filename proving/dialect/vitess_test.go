package dialect_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// The tests of this file show what vtgate does with the statements that a
// claim and a purge could send on a sharded keyspace, with
// transaction_mode SINGLE: what docs/scaling.md says of Vitess, and why
// idem.Vitess() claims as it does.

// vitessSlack is how much longer than its bound a wait may take on a
// loaded machine; a bound that does not hold waits for a holder that never
// ends before the test does.
const vitessSlack = 5 * time.Second

// waited fails t unless d is within [lo, hi].
func waited(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s took %v, want %v to %v", what, d, lo, hi)
	}
}

// heldOnItsShard sets up a store on Vitess whose record "k" a transaction
// holds, and begins a second transaction that has written an effect of "k"
// (noted "before"), on the shard of "k", before it meets the held record.
func heldOnItsShard(t *testing.T, tg dbtest.Target) (*dbtest.Env, *sql.Tx, *sql.Tx) {
	t.Helper()
	e := tg.Setup(t)
	holder := e.Hold(t, "k", dbtest.HashA, dbtest.Created)
	tx := e.Begin(t, nil)
	if err := e.Effects.Insert(context.Background(), tx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	return e, holder, tx
}

// TestVitessQueryTimeoutEndsTransaction shows that Vitess's QUERY_TIMEOUT_MS
// cannot bound a claim's lock wait: when it fires in a transaction, vttablet
// kills the shard's connection, and the transaction's writes before it are
// rolled back while vtgate goes on with the statements after it, which then
// commit on their own.
func TestVitessQueryTimeoutEndsTransaction(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		e, holder, tx := heldOnItsShard(t, tg)
		ctx := context.Background()
		start := time.Now()
		_, err := tx.ExecContext(ctx, "INSERT /*vt+ QUERY_TIMEOUT_MS=300 */ INTO "+e.Table+
			" (`key`, request_hash, token, created_at, expires_at) VALUES (?, ?, 1, 0, 0) ON DUPLICATE KEY UPDATE token = token", []byte("k"), dbtest.HashA)
		elapsed := time.Since(start)
		my := dbtest.VitessError(t, "the insert that waits for the held record", err)
		if my.Number != 3024 || !strings.Contains(my.Message, "killing connection") {
			t.Errorf("error %d %q, want 3024, killing the connection", my.Number, my.Message)
		}
		waited(t, "the timeout", elapsed, 300*time.Millisecond, 300*time.Millisecond+vitessSlack)
		// The next statement learns that the shard's transaction ended;
		// the one after it runs in a new one.
		err = e.Effects.Insert(ctx, tx, "k", "next")
		if my := dbtest.VitessError(t, "the next statement", err); my.Number != 1317 || !strings.Contains(my.Message, "ended") {
			t.Errorf("next statement: error %d %q, want 1317, the transaction ended", my.Number, my.Message)
		}
		if err := e.Effects.Insert(ctx, tx, "k", "later"); err != nil {
			t.Fatalf("the statement after: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := e.Effects.Notes(t)["k"]; !slices.Equal(got, []string{"later"}) {
			t.Errorf("effects of k = %q, want [later]: the write before the timeout lost, the one after it committed", got)
		}
	})
}

// TestVitessMaxExecutionTimeEndsStatement shows the bound that MySQL itself
// puts on one locking read: the optimizer hint MAX_EXECUTION_TIME, which
// vtgate passes on, interrupts the SELECT ... FOR UPDATE alone (MySQL's
// error 3024), and the transaction goes on with its writes. MySQL ignores
// it on the INSERT of a claim, which waits the session's lock wait.
func TestVitessMaxExecutionTimeEndsStatement(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		e, holder, tx := heldOnItsShard(t, tg)
		ctx := context.Background()
		// On an INSERT, MySQL ignores the hint: the insert waits the
		// session's innodb_lock_wait_timeout, the target's 1 s.
		start := time.Now()
		_, err := tx.ExecContext(ctx, "INSERT /*+ MAX_EXECUTION_TIME(300) */ INTO "+e.Table+
			" (`key`, request_hash, token, created_at, expires_at) VALUES (?, ?, 1, 0, 0) ON DUPLICATE KEY UPDATE token = token", []byte("k"), dbtest.HashA)
		if my := dbtest.VitessError(t, "the hinted insert", err); my.Number != 1205 {
			t.Errorf("the hinted insert: error %d %q, want 1205, the session's lock wait", my.Number, my.Message)
		}
		waited(t, "the hinted insert", time.Since(start), time.Second, time.Second+vitessSlack)
		start = time.Now()
		var token int64
		err = tx.QueryRowContext(ctx, "SELECT /*+ MAX_EXECUTION_TIME(300) */ token FROM "+e.Table+" WHERE `key` = ? FOR UPDATE", []byte("k")).Scan(&token)
		elapsed := time.Since(start)
		if my := dbtest.VitessError(t, "the read that waits for the held record", err); my.Number != 3024 || strings.Contains(my.Message, "killing connection") {
			t.Errorf("error %d %q, want MySQL's 3024", my.Number, my.Message)
		}
		waited(t, "the bound", elapsed, 300*time.Millisecond, 300*time.Millisecond+vitessSlack)
		if err := e.Effects.Insert(ctx, tx, "k", "after"); err != nil {
			t.Fatalf("the transaction after the interrupted read: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := e.Effects.Notes(t)["k"]; !slices.Equal(got, []string{"before", "after"}) {
			t.Errorf("effects of k = %q, want [before after]", got)
		}
	})
}

// TestVitessSessionLockWait shows that a session's innodb_lock_wait_timeout,
// set in the transaction or before it, reaches the shard's connection: the
// insert waits that long, fails with 1205, and the transaction keeps its
// writes, on one shard.
func TestVitessSessionLockWait(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		e, holder, tx := heldOnItsShard(t, tg)
		ctx := context.Background()
		if _, err := tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 2"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := tx.ExecContext(ctx, "INSERT INTO "+e.Table+
			" (`key`, request_hash, token, created_at, expires_at) VALUES (?, ?, 1, 0, 0) ON DUPLICATE KEY UPDATE token = token", []byte("k"), dbtest.HashA)
		elapsed := time.Since(start)
		if my := dbtest.VitessError(t, "the insert that waits for the held record", err); my.Number != 1205 {
			t.Errorf("error %d %q, want 1205", my.Number, my.Message)
		}
		waited(t, "the wait", elapsed, 2*time.Second, 2*time.Second+vitessSlack)
		if _, err := tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
			t.Fatal(err)
		}
		if err := e.Effects.Insert(ctx, tx, "k", "after"); err != nil {
			t.Fatalf("the transaction after the lock wait timeout: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := e.Effects.Notes(t)["k"]; !slices.Equal(got, []string{"before", "after"}) {
			t.Errorf("effects of k = %q, want [before after]", got)
		}
	})
}

// TestVitessRefusesMySQLDialect shows why idem.MySQL() cannot run behind
// vtgate on a sharded keyspace: vtgate's parser does not take the CREATE
// PROCEDURE of its Migrate, and it refuses the claim's CALL there.
func TestVitessRefusesMySQLDialect(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		e := tg.Setup(t)
		ctx := context.Background()
		store, err := idem.New(idem.MySQL(), idem.WithTable(e.Table))
		if err != nil {
			t.Fatal(err)
		}
		err = store.Migrate(ctx, e.DB)
		if my := dbtest.VitessError(t, "Migrate", err); my.Number != 1105 || !strings.Contains(my.Message, "syntax error") {
			t.Errorf("Migrate: error %d %q, want vtgate's syntax error", my.Number, my.Message)
		}
		// Prepared, the CALL is refused at once; sent with its values in
		// it, it is refused for the keyspace.
		_, err = store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, dbtest.MustNotRun(t))
		if my := dbtest.VitessError(t, "DoTx", err); my.Number != 1815 || !strings.Contains(my.Message, "unrecognized prepare statement") {
			t.Errorf("DoTx: error %d %q, want 1815, an unrecognized prepared statement", my.Number, my.Message)
		}
		interpolated := dbtest.TargetWithParams(tg, "interpolateParams=true").Open(t)
		_, err = store.DoTx(ctx, interpolated, nil, "k", dbtest.HashA, dbtest.MustNotRun(t))
		if my := dbtest.VitessError(t, "DoTx with interpolateParams", err); my.Number != 1235 || !strings.Contains(my.Message, "CALL is not supported for sharded keyspace") {
			t.Errorf("DoTx with interpolateParams: error %d %q, want 1235, CALL not supported", my.Number, my.Message)
		}
	})
}

// TestVitessPurgeAcrossShards shows what vtgate does with a purge of expired
// records that lie on both shards, sent through its routing by key: why
// Store.Purge targets each shard in turn there. MySQL's batch, a
// transaction, reads expired records on every shard, FOR UPDATE, which
// vtgate lets through with transaction_mode SINGLE, and then deletes them,
// which it refuses (1317). One DELETE ... ORDER BY
// expires_at LIMIT n, refused in the same way, is rewritten where vtgate
// may run it on several shards (transaction_mode MULTI): a plain SELECT of
// the keys on each shard, then a DELETE by those keys alone, without the
// expiry condition, so that a record taken over between the two is deleted
// all the same.
func TestVitessPurgeAcrossShards(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		clock := time.Now()
		e := tg.Setup(t, idem.WithClock(func() time.Time { return clock }), idem.WithRetention(time.Hour))
		ctx := context.Background()
		for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
			res, err := e.Do(t, key, dbtest.HashA, e.Effect(key, dbtest.Created), true)
			dbtest.WantOutcome(t, res, err, idem.Claimed)
		}
		clock = clock.Add(2 * time.Hour)
		// MySQL's batch: vtgate lets its read of both shards
		// through, and refuses its delete, which writes on both.
		batch := e.Begin(t, nil)
		rows, err := batch.QueryContext(ctx, "SELECT `key` FROM "+e.Table+" WHERE expires_at <= ? ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED", clock.UnixMicro())
		if err != nil {
			t.Fatalf("the batch's read: %v", err)
		}
		var keys []any
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("the batch's read: %v", err)
		}
		if len(keys) != 6 {
			t.Fatalf("the batch's read found %d records, want the 6 of both shards", len(keys))
		}
		_, err = batch.ExecContext(ctx, "DELETE FROM "+e.Table+" WHERE `key` IN (?"+strings.Repeat(", ?", len(keys)-1)+") AND expires_at <= ?", append(keys, clock.UnixMicro())...)
		if my := dbtest.VitessError(t, "the batch's delete", err); my.Number != 1317 || !strings.Contains(my.Message, "multi-db transaction attempted") {
			t.Errorf("the batch's delete: error %d %q, want 1317, a multi-db transaction", my.Number, my.Message)
		}
		if err := batch.Rollback(); err != nil {
			t.Fatal(err)
		}
		// vtgate plans the rewrite from the table's columns, which its
		// schema tracking learns from the shards about a second after a
		// table is created; until then the DELETE fails with VT09015. The
		// tablets reload their schema for it, which takes longer the more
		// tables the suite's tests hold open: a run of the whole suite on
		// a loaded two-core machine was seen still waiting after 30 s.
		del := "DELETE FROM " + e.Table + " WHERE expires_at <= " + strconv.FormatInt(clock.UnixMicro(), 10) + " ORDER BY expires_at LIMIT 2"
		for deadline := time.Now().Add(2 * time.Minute); ; {
			_, err = e.DB.ExecContext(ctx, del)
			if err == nil || !strings.Contains(err.Error(), "VT09015") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if my := dbtest.VitessError(t, "DELETE ... LIMIT", err); my.Number != 1317 {
			t.Errorf("DELETE ... LIMIT: error %d %q, want 1317", my.Number, my.Message)
		}
		conn, err := e.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SET transaction_mode = 'multi'"); err != nil {
			t.Fatal(err)
		}
		// VEXPLAIN QUERIES runs the statement and lists what vtgate sent
		// each shard.
		rows, err = conn.QueryContext(ctx, "VEXPLAIN QUERIES "+del)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var selects, deletes []string
		for rows.Next() {
			var n int
			var keyspace, shard, query string
			if err := rows.Scan(&n, &keyspace, &shard, &query); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s/%s: %s", keyspace, shard, query)
			switch {
			case strings.HasPrefix(query, "select"):
				selects = append(selects, query)
			case strings.HasPrefix(query, "delete"):
				deletes = append(deletes, query)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(selects) != 2 {
			t.Errorf("%d SELECTs, want one per shard: %q", len(selects), selects)
		}
		for _, q := range selects {
			if strings.Contains(q, "for update") {
				t.Errorf("the shard's SELECT locks: %s", q)
			}
		}
		if len(deletes) == 0 {
			t.Fatal("no DELETE sent")
		}
		for _, q := range deletes {
			if !strings.Contains(q, " in (") || strings.Contains(q, "expires_at") {
				t.Errorf("the DELETE %q, want one by key alone, without the expiry", q)
			}
		}
	})
}

// TestVitessLockingReadBeforeInsert shows why a claim cannot put a bounded
// locking read before its insert to honour the Store's lock timeout: under
// REPEATABLE READ, two claims of one new key both read no record, each
// locking the gap where it would be, and then both insert, which makes one
// of them a deadlock victim (1213), its whole transaction rolled back.
func TestVitessLockingReadBeforeInsert(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		e := tg.Setup(t)
		ctx := context.Background()
		read := "SELECT /*+ MAX_EXECUTION_TIME(300) */ token FROM " + e.Table + " WHERE `key` = ? FOR UPDATE"
		insert := "INSERT INTO " + e.Table + " (`key`, request_hash, token, created_at, expires_at) VALUES (?, ?, ?, 0, 0)"
		var txs [2]*sql.Tx
		for i := range txs {
			txs[i] = e.Begin(t, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			// Long enough that the first insert's wait outlasts any delay
			// of the second: the deadlock ends it, not the timeout.
			if _, err := txs[i].ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 60"); err != nil {
				t.Fatal(err)
			}
			var token int64
			if err := txs[i].QueryRowContext(ctx, read, []byte("new")).Scan(&token); !errors.Is(err, sql.ErrNoRows) {
				t.Fatalf("claim %d's read: %v, want no row", i, err)
			}
		}
		first := make(chan error, 1)
		go func() {
			_, err := txs[0].ExecContext(ctx, insert, []byte("new"), dbtest.HashA, 1)
			first <- err
		}()
		// The first insert waits for the second claim's gap lock, or,
		// should it run second, meets the second's wait: either way one
		// of the two is the victim.
		_, second := txs[1].ExecContext(ctx, insert, []byte("new"), dbtest.HashA, 2)
		var victims int
		for i, err := range []error{second, <-first} {
			if err == nil {
				continue
			}
			if my := dbtest.VitessError(t, "an insert", err); my.Number != 1213 {
				t.Errorf("insert %d: error %d %q, want 1213", i, my.Number, my.Message)
			}
			victims++
		}
		if victims != 1 {
			t.Errorf("%d deadlock victims, want 1", victims)
		}
	})
}

// TestVitessUnfinishedAcrossShards shows that Store.Unfinished, which reads
// every shard outside a transaction, lists the unfinished multi-step
// requests of both shards through vtgate, oldest first, within its limit.
func TestVitessUnfinishedAcrossShards(t *testing.T) {
	dbtest.ForEachVitess(t, func(t *testing.T, tg dbtest.Target) {
		clock := time.Now()
		e := tg.Setup(t, idem.WithClock(func() time.Time { return clock }))
		ctx := context.Background()
		keys := []string{"a", "b", "c", "d", "e", "f"}
		shards := map[string]bool{}
		for _, key := range keys {
			shard, err := dbtest.ShardOf(ctx, e.DB, []byte(key))
			if err != nil {
				t.Fatal(err)
			}
			shards[shard] = true
			failed := errors.New("the provider is down")
			_, err = e.Store.Run(ctx, e.DB, nil, key, dbtest.HashA,
				idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error { return e.Effects.Insert(ctx, tx, key, "order") }),
				idem.Call("charge", func(context.Context, string) error { return failed }),
				idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return dbtest.Created, nil }))
			if !errors.Is(err, failed) {
				t.Fatalf("Run %s: %v, want the call's error", key, err)
			}
			clock = clock.Add(time.Second)
		}
		if len(shards) != 2 {
			t.Fatalf("the keys are on %d shards, want both", len(shards))
		}
		got, err := e.Store.Unfinished(ctx, e.DB, 0, 4)
		if err != nil {
			t.Fatalf("Unfinished: %v", err)
		}
		var names []string
		for _, u := range got {
			names = append(names, u.Key)
		}
		if !slices.Equal(names, keys[:4]) {
			t.Errorf("Unfinished = %q, want the four oldest, %q", names, keys[:4])
		}
	})
}
