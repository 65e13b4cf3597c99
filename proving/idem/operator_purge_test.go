package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestPurgeBehindTakeover shows that Purge neither waits for a request that
// is taking an expired record over nor holds up the keys it deletes
// meanwhile. A delete that waited for the held record would keep the locks
// of the records it had already deleted in the same statement, and a new
// request with one of those keys would wait for Purge and answer InFlight
// after its lock timeout. Purge also leaves every live record alone: the
// one taken over, an unfinished multi-step request (which never expires)
// and a key claimed a moment ago. On Citus, where a read of many shards
// cannot lock its rows, it shows the batch skipping the key by the claim's
// own lock.
func TestPurgeBehindTakeover(t *testing.T) {
	dbtest.ForEachWithTiDB(t, testPurgeBehindTakeover)
	dbtest.ForEachVitess(t, testPurgeBehindTakeover)
	dbtest.ForEachCitus(t, testPurgeBehindTakeover)
}

func testPurgeBehindTakeover(t *testing.T, tg target) {
	if dialect.CapabilitiesOf(tg.Dialect).ConflictAtCommit {
		t.Skip("a claim holds no lock until its commit: there is nothing for Purge to wait for")
	}
	var c dbtest.Clock
	e := setup(t, c.Leases(tg), idem.WithClock(c.Now), idem.WithRetention(time.Hour), idem.WithLockTimeout(3*time.Second))
	oneWriter := dialect.CapabilitiesOf(tg.Dialect).OneWriter
	ctx := context.Background()

	// Expired records, oldest first: a-0 to a-4, then b-held, then
	// c-0 to c-4, so that a delete in the order of expiry, or in the
	// order of the keys, meets b-held with a-0 to a-4 already deleted.
	claim := func(key string) {
		t.Helper()
		res, err := e.Do(t, key, dbtest.HashA, e.Effect(key, dbtest.Created), true)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
	}
	c.Advance(-3 * time.Hour)
	for i := range 5 {
		claim(fmt.Sprint("a-", i))
	}
	o := &order{e: e, key: "e-unfinished"}
	down := errors.New("provider unreachable")
	o.charge = func(context.Context, string) error { return down }
	if _, err := o.run(t, dbtest.HashA); !errors.Is(err, down) {
		t.Fatalf("Run: %v, want the provider's error", err)
	}
	c.Advance(time.Minute)
	claim("b-held")
	c.Advance(time.Minute)
	for i := range 5 {
		claim(fmt.Sprint("c-", i))
	}
	c.Advance(3*time.Hour - 2*time.Minute)
	claim("d-fresh")

	// A request takes b-held over and keeps it while Purge runs.
	holder := e.Begin(t, nil)
	taken, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		res, err := e.Store.Do(ctx, holder, "b-held", dbtest.HashB, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			close(taken)
			<-release
			return e.Effect("b-held", dbtest.Replayed)(ctx, tx)
		})
		if err == nil && res.Outcome != idem.Claimed {
			err = fmt.Errorf("outcome %v, want Claimed", res.Outcome)
		}
		if err == nil {
			err = holder.Commit()
		}
		held <- err
	}()
	<-taken

	var (
		purged   int64
		purgeErr error
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		purged, purgeErr = e.Store.Purge(ctx, e.DB, 100)
	}()
	if oneWriter {
		// The holder has the one write lock, and Purge waits for it
		// at BEGIN, as a new request would.
		close(release)
	}
	// Either Purge is done, or it waits for b-held: a new request with
	// a key it deletes must not wait for it either way.
	waiting := waitForLockWait(t, e, done)
	start := time.Now()
	res, err := e.Do(t, "a-4", dbtest.HashB, e.Effect("a-4", dbtest.Created), true)
	if err != nil || res.Outcome != idem.Claimed {
		t.Errorf("a request with a key that Purge deletes: %v, %v after %v, want Claimed at once (Purge seen waiting for the held record: %v)",
			res.Outcome, err, time.Since(start).Round(time.Millisecond), waiting)
	}
	again := err == nil && res.Outcome == idem.Claimed

	if !oneWriter {
		close(release)
	}
	if err := <-held; err != nil {
		t.Fatalf("the request that took b-held over: %v", err)
	}
	<-done
	if errors.Is(purgeErr, idem.ErrRetry) && isTiDB(t, e) {
		// TiDB accepts SKIP LOCKED and reads without locking: the
		// batch waited for b-held, up to the lock timeout, and was
		// given up. The next run deletes it.
		var n int64
		n, purgeErr = e.Store.Purge(ctx, e.DB, 100)
		purged += n
	}
	if purgeErr != nil {
		t.Fatalf("Purge: %v", purgeErr)
	}
	// a-4 is there again if the request claimed it: after Purge
	// deleted it (Purge counts 10), or by taking it over before Purge
	// came to it (9).
	want := []string{"d-fresh", "b-held", "e-unfinished"}
	if again {
		want = append(want, "a-4")
	}
	slices.Sort(want)
	if got := dbtest.StoredKeys(t, e.Env, e.tg.Family); !slices.Equal(got, want) {
		t.Errorf("records left: %q, want %q", got, want)
	}
	if purged != 10 && !(again && purged == 9) {
		t.Errorf("Purge deleted %d records, want 10", purged)
	}
	if res, err := e.Store.Lookup(ctx, e.DB, "b-held"); err != nil || res.Response.Status != dbtest.Replayed.Status {
		t.Errorf("Lookup(b-held) = %+v, %v; want the response of the request that took it over", res, err)
	}
}

// waitForLockWait waits until either done is closed, and then reports
// false, or the server shows a statement on e's table waiting for a row
// lock, and then reports true. SQLite has no row locks: there it waits for
// done.
func waitForLockWait(t *testing.T, e *env, done <-chan struct{}) bool {
	t.Helper()
	var query string
	switch e.tg.Family {
	case "sqlite":
		<-done
		return false
	case "postgres":
		query = `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0`
		if e.tg.Distributed {
			// The wait is on the worker that holds the row, in a
			// statement on its shard, whose name begins with the
			// table's.
			query = `SELECT count(*) FROM citus_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`
		}
	default:
		query = `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND LOCATE(?, trx_query) > 0`
		if isTiDB(t, e) {
			query = `SELECT COUNT(*) FROM information_schema.TIDB_TRX WHERE STATE = 'LockWaiting' AND LOCATE(?, CURRENT_SQL_DIGEST_TEXT) > 0`
		}
	}
	deadline := time.After(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false
		case <-deadline:
			t.Fatal("the call neither returned nor waited for a lock within a minute")
		case <-tick.C:
		}
		var n int
		if err := e.DB.QueryRow(query, e.Table).Scan(&n); err != nil {
			var my *mysql.MySQLError
			if errors.As(err, &my) && my.Number == myCannotConvert {
				continue // another test's statement, with binary bytes in its text: look again
			}
			t.Fatalf("looking for lock waits: %v", err)
		}
		if n > 0 {
			return true
		}
	}
}

// myCannotConvert is MySQL's error for a string that the server cannot
// convert to another character set: INNODB_TRX, in utf8mb3, fails with it
// while another session's statement holds bytes that are not UTF-8, as
// those with interpolated binary keys do.
const myCannotConvert = 3854

// isTiDB reports whether e's server is TiDB.
func isTiDB(t *testing.T, e *env) bool {
	t.Helper()
	if e.tg.Family != "mysql" {
		return false
	}
	var version string
	if err := e.DB.QueryRow(`SELECT VERSION()`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(version, "TiDB")
}
