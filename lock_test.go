package idem_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestInFlightOnEveryIsolationLevel holds a key in one transaction and
// claims it from another at each isolation level: the answer is InFlight
// within the lock timeout, with the transaction still usable, and never an
// error after the session's own lock wait (MariaDB's innodb_lock_wait_timeout
// is 50 s, and a plain SELECT is a locking read under SERIALIZABLE).
func TestInFlightOnEveryIsolationLevel(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		if idem.CapabilitiesOf(tg.Dialect).OneWriter {
			t.Skip("SQLite has one writer at a time: a second claimer waits at BEGIN (TestIsolation/sqlite)")
		}
		const lockTimeout = time.Second
		e := setup(t, tg, idem.WithLockTimeout(lockTimeout))
		ctx := context.Background()
		holder := e.Hold(t, "held", hashA, created)
		for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
			t.Run(level.String(), func(t *testing.T) {
				tx := e.Begin(t, &sql.TxOptions{Isolation: level})
				start := time.Now()
				res, err := e.Store.Do(ctx, tx, "held", hashA, mustNotRun(t))
				elapsed := time.Since(start)
				wantOutcome(t, res, err, idem.InFlight)
				// The MySQL dialect's lookup after a claim that waited
				// in vain is a locking read under SERIALIZABLE, which
				// waits the lock timeout again, as its doc says. The
				// margin is for a busy machine: the right answer took
				// up to 1.4 s more than its waits with two loaded
				// cores; the wrong one, a lookup that waits the
				// session's own lock wait, takes 50 s on the MySQL
				// family (forever on PostgreSQL).
				const margin = 5 * time.Second
				bound := lockTimeout
				if level == sql.LevelSerializable && tg.Dialect == idem.MySQL() {
					bound *= 2
				}
				if elapsed > bound+margin {
					t.Errorf("InFlight after %v, want it within %v and %v", elapsed, bound, margin)
				}
				var one int
				if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
					t.Errorf("the transaction is not usable after InFlight: %v", err)
				}
			})
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPostgresLockSameForEverySpelling claims a key through two stores that
// spell one table differently: they must take the same advisory lock, or the
// second claim waits for the row itself, unbounded by the lock timeout.
func TestPostgresLockSameForEverySpelling(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only: the lock number is its advisory lock")
		}
		e := setup(t, tg)
		qualified, err := idem.New(tg.Dialect, idem.WithTable("public."+e.Table), idem.WithLockTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		holder := e.Hold(t, "held", hashA, created)
		// Without the shared lock the claim waits until the holder ends;
		// the deadline turns that wait into an error instead of a hang.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := qualified.DoTx(ctx, e.DB, nil, "held", hashA, mustNotRun(t))
		wantOutcome(t, res, err, idem.InFlight)
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPostgresUserLockTimeout gives the caller's transaction a lock_timeout
// of its own that fires during the claim. The claim never waits on the
// advisory lock, but its insert waits for a row that a writer outside idem
// (or a process of an earlier release, whose lock number differs) inserted
// and has not committed. PostgreSQL aborts the transaction, so Do must
// answer ErrRetry, never InFlight with a transaction that cannot go on.
func TestPostgresUserLockTimeout(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only")
		}
		e := setup(t, tg)
		ctx := context.Background()
		writer := e.Begin(t, nil)
		if _, err := writer.ExecContext(ctx, "INSERT INTO "+e.Table+" (key, request_hash, created_at, expires_at) VALUES ($1, $2, 0, $3)",
			[]byte("k"), hashA, time.Now().Add(time.Hour).UnixMicro()); err != nil {
			t.Fatal(err)
		}
		tx := e.Begin(t, nil)
		if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '100ms'"); err != nil {
			t.Fatal(err)
		}
		_, err := e.Store.Do(ctx, tx, "k", hashA, mustNotRun(t))
		wantRetry(t, err)
		if _, err := tx.ExecContext(ctx, "SELECT 1"); err == nil {
			t.Error("the transaction went on after the lock timeout; PostgreSQL should have aborted it")
		}
		if err := writer.Rollback(); err != nil {
			t.Fatal(err)
		}
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", hashA, e.Effect("k", created))
		if err != nil || res.Outcome != idem.Claimed {
			t.Fatalf("DoTx after the writer left = %v, %v; want Claimed", res.Outcome, err)
		}
	})
}
