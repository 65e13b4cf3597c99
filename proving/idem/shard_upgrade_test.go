package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/codec"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestShardKindsRollingUpgrade shows what docs/operations.md, "Upgrading
// the table", says of a rolling upgrade to shard kinds on a table with a
// shard column, where binaries of the version before them still serve.
// On PostgreSQL they take the advisory lock of a record's key alone, and
// this version's claims that of the pair (shard value, key); on the MySQL
// family they call the claim procedure of their version, which this
// version's Migrate leaves as it was.
func TestShardKindsRollingUpgrade(t *testing.T) {
	dbtest.ForEachPooled(t, func(t *testing.T, tg target) {
		switch {
		case tg.Family == "postgres":
			rollingShardLocks(t, tg)
		case tg.Dialect.Name() == "mysql":
			rollingShardProcedures(t, tg)
		default:
			t.Skip("neither the PostgreSQL dialect's locks nor the MySQL dialect's procedures")
		}
	})
}

// bindQuery returns the arguments of q, by the names of its parameters.
func bindQuery(t *testing.T, q idem.StatementText, vals map[string]any) []any {
	t.Helper()
	args := make([]any, len(q.Params))
	for i, p := range q.Params {
		v, ok := vals[p]
		if !ok {
			t.Fatalf("no value for {%s} of\n%s", p, q.SQL)
		}
		args[i] = v
	}
	return args
}

// rollingShardLocks holds a record's claim, as a binary of the version
// before shard kinds sends it, open in a transaction: this version's
// Claim, bound to the lock of the key alone, which that version's binaries
// took, and the record completed. A claim of the same record by this
// version, with a lock timeout of 0, does not see that lock: it waits on
// the row until the transaction ends, where a claim of this version's
// answers InFlight at once, and then answers from the record that the
// other committed, or claims the key when the other rolled back.
func rollingShardLocks(t *testing.T, tg target) {
	ctx := context.Background()
	db := tg.Open(t)
	attempts := make(chan int, 1) // of the last DoTx
	e := dbtest.SetupSharded(t, tg.Dialect, db, dbtest.ShardKind, idem.WithLockTimeout(0), idem.WithObserver(func(_ context.Context, ev idem.Event) {
		if ev.Kind == idem.EventCall {
			select {
			case <-attempts:
			default:
			}
			attempts <- ev.Attempts
		}
	}))
	qs := e.Store.Queries()
	customer := idem.WithShard(ctx, int64(7))
	resp := idem.Response{Status: 201, Body: []byte(`{"order":1}`)}

	// oldClaim opens the old binary's transaction, which claims key and
	// completes it, and returns it with its server process.
	oldClaim := func(key string) (*sql.Tx, int) {
		t.Helper()
		tx := e.Begin(t, nil)
		header, body := codec.EncodeHeader(resp.Header), resp.Body
		sum := codec.Checksum([]byte(key), dbtest.HashA, int64(resp.Status), header, body)
		now := time.Now()
		vals := map[string]any{
			"shard": int64(7), "key": []byte(key), "request_hash": dbtest.HashA, "token": int64(4711), "incarnation": int64(99),
			"created_at": now.UnixMicro(), "expires_at": now.Add(time.Hour).UnixMicro(),
			"lock_id": dialect.LockID([]byte(key)), // the key's alone
			"status":  int64(resp.Status), "header": header, "body": body, "checksum": sum[:],
		}
		rows, err := tx.QueryContext(ctx, qs["Claim"].SQL, bindQuery(t, qs["Claim"], vals)...)
		if err != nil {
			t.Fatal(err)
		}
		claimed := rows.Next()
		if err := errors.Join(rows.Close(), rows.Err()); err != nil || !claimed {
			t.Fatalf("the old binary's claim of %s: claimed %v, %v", key, claimed, err)
		}
		if _, err := tx.ExecContext(ctx, qs["Complete"].SQL, bindQuery(t, qs["Complete"], vals)...); err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return tx, pid
	}

	type answer struct {
		res  idem.Result
		err  error
		runs int
	}
	// newClaim sends this version's claim of key through DoTx, in
	// transactions of opts, while the old binary's transaction on pid
	// is open, and returns its answer once it waits for that
	// transaction and end has ended it.
	newClaim := func(key string, opts *sql.TxOptions, pid int, end func() error) answer {
		t.Helper()
		done := make(chan answer, 1)
		go func() {
			var a answer
			a.res, a.err = e.Store.DoTx(customer, db, opts, key, dbtest.HashA, countingFunc(&a.runs, dbtest.Created))
			done <- a
		}()
		for deadline := time.Now().Add(time.Minute); ; {
			select {
			case a := <-done:
				t.Fatalf("this version's claim of %s answered %v, %v while the old binary's claim was open, want it to wait", key, a.res.Outcome, a.err)
			default:
			}
			var waiting int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("this version's claim of %s neither answered nor waited for the old binary's transaction", key)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := end(); err != nil {
			t.Fatal(err)
		}
		return <-done
	}

	// Committed: the waiting claim replays the old binary's record. In
	// a transaction of REPEATABLE READ, whose snapshot is older than the
	// commit, the claim fails with ErrRetry, and DoTx's next attempt
	// replays it.
	for _, c := range []struct {
		key      string
		opts     *sql.TxOptions
		attempts int
	}{
		{"order-1", nil, 1},
		{"order-4", &sql.TxOptions{Isolation: sql.LevelRepeatableRead}, 2},
	} {
		tx, pid := oldClaim(c.key)
		a := newClaim(c.key, c.opts, pid, tx.Commit)
		if a.err != nil || a.res.Outcome != idem.Replay || a.runs != 0 || a.res.Incarnation != 99 {
			t.Fatalf("this version's claim of %s after the old binary's commit: %v %v, %d runs, incarnation %d; want Replay of its record, no run",
				c.key, a.res.Outcome, a.err, a.runs, a.res.Incarnation)
		}
		dbtest.SameResponse(t, a.res.Response, resp)
		if n := <-attempts; n != c.attempts {
			t.Errorf("DoTx of %s in transactions of %+v ran %d, want %d", c.key, c.opts, n, c.attempts)
		}
	}

	// Rolled back: the waiting claim claims the key.
	tx, pid := oldClaim("order-2")
	a := newClaim("order-2", nil, pid, tx.Rollback)
	if a.err != nil || a.res.Outcome != idem.Claimed || a.runs != 1 {
		t.Fatalf("this version's claim after the old binary's rollback: %v %v, %d runs; want Claimed, one run", a.res.Outcome, a.err, a.runs)
	}

	// Between two binaries of this version, the lock is the pair's: the
	// second answers InFlight at once.
	held := e.Begin(t, nil)
	var runs int
	res, err := e.Store.Do(customer, held, "order-3", dbtest.HashA, countingFunc(&runs, dbtest.Created))
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	res, err = e.Store.DoTx(customer, db, nil, "order-3", dbtest.HashA, countingFunc(&runs, dbtest.Created))
	dbtest.WantOutcome(t, res, err, idem.InFlight)
	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
}

// rollingShardProcedures makes a table with the sharded migration files
// of the version before shard kinds (versions 1 and 2), whose binaries
// call its procedure <table>_claim2. This version's claim fails there,
// asking for Migrate, which adds <table>_claim_int64 and leaves the
// procedures that were there as they were. Then a claim through
// <table>_claim2, as an old binary sends it, and this version's Store
// answer each other's records.
func rollingShardProcedures(t *testing.T, tg target) {
	ctx := context.Background()
	db := tg.Open(t)
	table := dbtest.NewTable(t, db, "idem_v2_")
	for _, m := range loadMigrations(t, "mysql/sharded", "goose", table)[:2] {
		execAll(t, db, m.name+" up", m.up)
	}
	before := describe(t, db, tg.Family, table).Routines
	store := dbtest.NewStore(t, tg.Dialect, table, idem.WithShardColumn(dbtest.ShardKind))
	customer := idem.WithShard(ctx, int64(7))
	var runs int
	if _, err := store.DoTx(customer, db, nil, "too-early", dbtest.HashA, countingFunc(&runs, dbtest.Created)); err == nil || !strings.Contains(err.Error(), "run it first") || runs != 0 {
		t.Fatalf("this version's claim before Migrate: %v, %d runs; want the hint to run Migrate, no run", err, runs)
	}
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	after := describe(t, db, tg.Family, table).Routines
	for _, r := range before {
		if !slices.Contains(after, r) {
			t.Errorf("Migrate changed or dropped the procedure\n%s", r)
		}
	}
	if len(after) != len(before)+1 || !slices.ContainsFunc(after, func(r string) bool { return strings.HasPrefix(r, "T_claim_int64 ") }) {
		t.Errorf("after Migrate the procedures are\n%s\nwant those before and T_claim_int64", strings.Join(after, "\n"))
	}

	// oldCall claims key through <table>_claim2 with token in a
	// transaction and, where it claims, completes the record and
	// commits; it returns the status of the record it found otherwise.
	resp := idem.Response{Status: 201, Body: []byte(`{"order":1}`)}
	oldCall := func(key string, token int64) (found sql.NullInt64) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		now := time.Now()
		var dst [11]any
		for i := range dst {
			dst[i] = new(any)
		}
		dst[3] = &found
		err = tx.QueryRowContext(ctx, "CALL "+table+"_claim2(?, ?, ?, ?, ?, ?, ?, 1)",
			int64(7), []byte(key), dbtest.HashA, token, int64(99), now.UnixMicro(), now.Add(time.Hour).UnixMicro()).Scan(dst[:]...)
		if err == nil {
			return found
		}
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("the old binary's claim of %s: %v", key, err)
		}
		header, body := codec.EncodeHeader(resp.Header), resp.Body
		sum := codec.Checksum([]byte(key), dbtest.HashA, int64(resp.Status), header, body)
		if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET status = ?, header = ?, body = ?, checksum = ? WHERE shard_key = ? AND `key` = ? AND token = ?",
			resp.Status, header, body, sum[:], int64(7), []byte(key), token); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return found
	}
	if found := oldCall("order-1", 4711); found.Valid {
		t.Fatalf("the old binary's claim of a new key found a record of status %d", found.Int64)
	}
	res, err := store.DoTx(customer, db, nil, "order-1", dbtest.HashA, countingFunc(&runs, dbtest.Created))
	dbtest.WantOutcome(t, res, err, idem.Replay)
	dbtest.SameResponse(t, res.Response, resp)
	if res.Incarnation != 99 {
		t.Errorf("this version's replay of the old binary's record: incarnation %d, want 99", res.Incarnation)
	}
	res, err = store.DoTx(customer, db, nil, "order-2", dbtest.HashA, countingFunc(&runs, dbtest.Created))
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	if found := oldCall("order-2", 4712); !found.Valid || found.Int64 != int64(dbtest.Created.Status) {
		t.Errorf("the old binary's claim of the record this version stored: status %v, want %d", found, dbtest.Created.Status)
	}
	if runs != 1 {
		t.Errorf("this version's Funcs ran %d times, want once", runs)
	}
}
