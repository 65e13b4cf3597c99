package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// The benchmarks run on SQLite always, and on PostgreSQL and MariaDB when
// scripts/test has started them:
//
//	go test -run '^$' -bench . -benchmem
//	bash scripts/test -- go test -run '^$' -bench . -benchmem
//
// docs/performance.md has the figures, and proving/cmd/idembench compares the paths
// side by side.

// benchClients is the number of concurrent clients of the database
// benchmarks, as b.SetParallelism counts them: a multiple of GOMAXPROCS.
const benchClients = 16

// benchTargets lists the databases the benchmarks reach, and a skipped
// benchmark for each server that is not set.
func benchTargets(b *testing.B, f func(b *testing.B, tg target, db *sql.DB)) {
	ts := []target{dbtest.SQLite("_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")}
	for _, tg := range dbtest.TargetsWithSettings()[1:] {
		// MariaDB with interpolateParams, which saves a round trip per
		// statement (see docs/performance.md).
		if tg.Family != "mysql" || strings.Contains(tg.Name, "interpolate") {
			ts = append(ts, tg)
		}
	}
	for _, tg := range ts {
		b.Run(tg.Name, func(b *testing.B) {
			db := tg.Open(b)
			db.SetMaxOpenConns(benchClients)
			db.SetMaxIdleConns(benchClients)
			f(b, tg, db)
		})
	}
	for _, u := range dbtest.Missing() {
		b.Run(u.Name, func(b *testing.B) { b.Skip(u.Reason) })
	}
}

// doOnce runs Do for key in a transaction of its own, committing a claim
// and rolling back anything else, and fails b unless the outcome is want.
func doOnce(b *testing.B, db *sql.DB, store *idem.Store, key string, fn idem.Func, want idem.Outcome) {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Error(err)
		return
	}
	res, err := store.Do(ctx, tx, key, dbtest.HashA, fn)
	if err == nil && res.Outcome == idem.Claimed {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	if err != nil {
		b.Error(err)
	} else if res.Outcome != want {
		b.Errorf("outcome %v, want %v", res.Outcome, want)
	}
}

// BenchmarkClaimed claims a new key per operation, with an effect of one
// INSERT, from 16 concurrent clients: BEGIN, claim, INSERT, complete, COMMIT.
func BenchmarkClaimed(b *testing.B) {
	benchTargets(b, func(b *testing.B, tg target, db *sql.DB) {
		e := dbtest.Setup(b, tg.Dialect, db)
		prefix := dbtest.RandomName()
		var n atomic.Int64
		b.SetParallelism(max(1, benchClients/parallelism()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := prefix + strconv.FormatInt(n.Add(1), 10)
				doOnce(b, db, e.Store, key, e.Effect(key, dbtest.Created), idem.Claimed)
			}
		})
	})
}

// BenchmarkReplay replays keys that finished earlier: BEGIN, claim (and on
// SQLite the lookup), ROLLBACK.
func BenchmarkReplay(b *testing.B) {
	benchTargets(b, func(b *testing.B, tg target, db *sql.DB) {
		e := dbtest.Setup(b, tg.Dialect, db)
		const keys = 1000
		prefix := dbtest.RandomName()
		for i := range keys {
			key := prefix + strconv.Itoa(i)
			doOnce(b, db, e.Store, key, e.Effect(key, dbtest.Created), idem.Claimed)
		}
		var n atomic.Int64
		b.SetParallelism(max(1, benchClients/parallelism()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := prefix + strconv.FormatInt(n.Add(1)%keys, 10)
				doOnce(b, db, e.Store, key, mustNotRunB(b), idem.Replay)
			}
		})
	})
}

// BenchmarkBareTx is the same effect without idem: BEGIN, INSERT, COMMIT.
func BenchmarkBareTx(b *testing.B) {
	benchTargets(b, func(b *testing.B, tg target, db *sql.DB) {
		orders := dbtest.Setup(b, tg.Dialect, db).Effects
		prefix := dbtest.RandomName()
		var n atomic.Int64
		b.SetParallelism(max(1, benchClients/parallelism()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				key := prefix + strconv.FormatInt(n.Add(1), 10)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Error(err)
					return
				}
				if err := orders.Insert(ctx, tx, key, "order"); err != nil {
					_ = tx.Rollback()
					b.Error(err)
					return
				}
				if err := tx.Commit(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// parallelism is what b.SetParallelism multiplies.
func parallelism() int { return runtime.GOMAXPROCS(0) }

func mustNotRunB(b *testing.B) idem.Func {
	return func(context.Context, *sql.Tx) (idem.Response, error) {
		b.Error("fn ran on a replay")
		return idem.Response{}, nil
	}
}

// BenchmarkDoNoopDriver measures Do without a database: what the library
// and database/sql cost in Go per call, allocations included. Every
// iteration is one Do in the same transaction.
func BenchmarkDoNoopDriver(b *testing.B) {
	for _, c := range []struct {
		name    string
		dialect idem.Dialect
		replay  bool
	}{
		{"postgres/claimed", idem.Postgres(), false},
		{"mysql/claimed", idem.MySQL(), false},
		{"sqlite/claimed", idem.SQLite(), false},
		{"postgres/replay", idem.Postgres(), true},
		{"mysql/replay", idem.MySQL(), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			store, err := idem.New(c.dialect)
			if err != nil {
				b.Fatal(err)
			}
			const key = "5f0c7e1e-8d1a-4d6b-9a43-2f3c1b7d9e01"
			db := sql.OpenDB(newNoopConnector(store, c.replay, key, dbtest.HashA, dbtest.Created))
			defer db.Close()
			ctx := context.Background()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Rollback()
			fn := func(context.Context, *sql.Tx) (idem.Response, error) { return dbtest.Created, nil }
			want := idem.Claimed
			if c.replay {
				want = idem.Replay
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := store.Do(ctx, tx, key, dbtest.HashA, fn)
				if err != nil || res.Outcome != want {
					b.Fatalf("Do: %v, %v", res.Outcome, err)
				}
			}
		})
	}
}

// BenchmarkHandWrittenNoopDriver sends the claim and the completion of the
// PostgreSQL dialect through database/sql by hand, on the no-op driver:
// what database/sql alone costs for the statements Do sends.
func BenchmarkHandWrittenNoopDriver(b *testing.B) {
	qs, tx := noopClaimTx(b)
	claim, complete := qs["Claim"].SQL, qs["Complete"].SQL
	checkNoopParams(b, qs)
	ctx := context.Background()
	key := []byte("5f0c7e1e-8d1a-4d6b-9a43-2f3c1b7d9e01")
	header, body, sum := []byte{}, []byte("{}"), make([]byte, 32)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var (
			claimed, busy                bool
			hash, header2, body2, chk    []byte
			status, createdAt, expiresAt sql.NullInt64
			token, incarnation           sql.NullInt64
		)
		err := tx.QueryRowContext(ctx, claim, key, dbtest.HashA, int64(1), int64(2), int64(7), int64(4711), int64(42)).Scan(
			&claimed, &busy, &hash, &status, &header2, &body2, &chk, &createdAt, &expiresAt, &token, &incarnation)
		if err != nil || !claimed {
			b.Fatal(err)
		}
		r, err := tx.ExecContext(ctx, complete, int64(201), header, body, sum, key, int64(7))
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			b.Fatal(n)
		}
	}
}

// checkNoopParams stops a benchmark whose arguments, written out in the
// order of the PostgreSQL claim and completion, no longer fit them.
func checkNoopParams(b testing.TB, qs map[string]idem.StatementText) {
	b.Helper()
	want := map[string][]string{
		"Claim":    {"key", "request_hash", "created_at", "expires_at", "token", "incarnation", "lock_id"},
		"Complete": {"status", "header", "body", "checksum", "key", "token"},
	}
	for name, params := range want {
		if !slices.Equal(qs[name].Params, params) {
			b.Fatalf("the %s statement binds %v, and the benchmark %v", name, qs[name].Params, params)
		}
	}
}

// BenchmarkDatabaseSQLFloorNoopDriver is the least that database/sql itself
// allocates for the claim and the completion in a transaction: the same two
// statements as BenchmarkHandWrittenNoopDriver, with their arguments boxed
// once outside the loop and the claim's row read into sql.RawBytes, which
// copies nothing. What a Do call allocates beyond this is for its own
// per-call values.
func BenchmarkDatabaseSQLFloorNoopDriver(b *testing.B) {
	qs, tx := noopClaimTx(b)
	call := floorCall(b, qs, tx)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
}

// floorCall returns one call of BenchmarkDatabaseSQLFloorNoopDriver: the
// claim and the completion with nothing made per call.
func floorCall(tb testing.TB, qs map[string]idem.StatementText, tx *sql.Tx) func() error {
	checkNoopParams(tb, qs)
	ctx := context.Background()
	key := []byte("5f0c7e1e-8d1a-4d6b-9a43-2f3c1b7d9e01")
	claimArgs := []any{key, dbtest.HashA, int64(1), int64(2), int64(7), int64(4711), int64(42)}
	completeArgs := []any{int64(201), []byte{}, []byte("{}"), make([]byte, 32), key, int64(7)}
	var cols [11]sql.RawBytes
	dest := make([]any, len(cols))
	for i := range cols {
		dest[i] = &cols[i]
	}
	return func() error {
		rows, err := tx.QueryContext(ctx, qs["Claim"].SQL, claimArgs...)
		if err != nil {
			return err
		}
		if !rows.Next() {
			return errors.New("the claim returned no row")
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, qs["Complete"].SQL, completeArgs...)
		return err
	}
}

// allocsAboveFloor is what a Claimed Do on PostgreSQL allocates beyond
// database/sql's own floor for the same statements, as docs/performance.md
// gives it: the figure to keep or beat, which the test logs.
const allocsAboveFloor = 18

// allocsHeadroom is how many allocations beyond allocsAboveFloor the test
// lets pass: the runtime allocates for itself now and then (see
// allocsPerCall), more often on a busy machine, and a count that the
// median and the retries do not smooth out must not fail a run. A Do that
// allocates more for itself shows it in the logged figure first; a change
// that costs more than the headroom fails.
const allocsHeadroom = 2

// TestDoAllocationsAboveFloor keeps a Claimed Do within allocsAboveFloor
// allocations of BenchmarkDatabaseSQLFloorNoopDriver's call, and
// allocsHeadroom more. Allocations are counted, not timed, so a busy
// machine does not move them but for the runtime's own; the race detector
// would, and the test runs without it.
func TestDoAllocationsAboveFloor(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector makes sync.Pool drop items at random, so allocations vary: scripts/test runs this test again without it")
	}
	qs, tx := noopClaimTx(t)
	call := floorCall(t, qs, tx)
	countFloor := func() uint64 {
		return allocsPerCall(501, func() {
			if err := call(); err != nil {
				t.Fatal(err)
			}
		})
	}
	floor := countFloor()
	store, err := idem.New(idem.Postgres())
	if err != nil {
		t.Fatal(err)
	}
	const key = "5f0c7e1e-8d1a-4d6b-9a43-2f3c1b7d9e01"
	db := sql.OpenDB(newNoopConnector(store, false, key, dbtest.HashA, dbtest.Created))
	defer db.Close()
	ctx := context.Background()
	dtx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dtx.Rollback()
	fn := func(context.Context, *sql.Tx) (idem.Response, error) { return dbtest.Created, nil }
	// On a machine busy enough, the runtime's own allocations (see
	// allocsPerCall) can move even the median, the floor's down as well as
	// Do's up: a count over the figure is taken again, up to five times,
	// with the floor's, and the least of Do's and the most of the floor's
	// count. A Do that allocates more shows it in every count.
	do := uint64(math.MaxUint64)
	for i := range 5 {
		if i > 0 {
			floor = max(floor, countFloor())
		}
		do = min(do, allocsPerCall(501, func() {
			if res, err := store.Do(ctx, dtx, key, dbtest.HashA, fn); err != nil || res.Outcome != idem.Claimed {
				t.Fatalf("Do: %v, %v", res.Outcome, err)
			}
		}))
		if do <= floor+allocsAboveFloor {
			break
		}
	}
	t.Logf("Do %d allocations, database/sql's floor %d: %d above it, where docs/performance.md gives %d", do, floor, do-floor, allocsAboveFloor)
	if do > floor+allocsAboveFloor+allocsHeadroom {
		t.Errorf("a Claimed Do allocates %d times beyond database/sql's floor of %d, more than the %d of docs/performance.md and %d of headroom", do-floor, floor, allocsAboveFloor, allocsHeadroom)
	}
}

// allocsPerCall returns the allocations of one call of f: the median of n
// calls, each counted alone, with one P, as testing.AllocsPerRun counts
// them. The runtime allocates now and then for itself (a goroutine for the
// watcher of a query's context, when none is free to reuse), more often on
// a busy machine, and the median leaves that out where a mean would not.
func allocsPerCall(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	counts := make([]uint64, n)
	var before, after runtime.MemStats
	for i := range counts {
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		counts[i] = after.Mallocs - before.Mallocs
	}
	slices.Sort(counts)
	return counts[n/2]
}

// noopClaimTx begins a transaction on the no-op driver, which answers every
// claim of the PostgreSQL dialect as won, and returns it with the dialect's
// statements, for benchmarks that send them by hand.
func noopClaimTx(b testing.TB) (map[string]idem.StatementText, *sql.Tx) {
	store, err := idem.New(idem.Postgres())
	if err != nil {
		b.Fatal(err)
	}
	db := sql.OpenDB(newNoopConnector(store, false, "k", dbtest.HashA, dbtest.Created))
	b.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tx.Rollback() })
	return store.Queries(), tx
}
