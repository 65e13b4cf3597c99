package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestStats counts the records of a table on every database. An empty table
// has none, and no oldest. Then two records that expired, three live ones
// and one that a Func left unfinished by committing its transaction (live,
// in flight) count as such, with the time of the oldest claim, while a
// claim that another transaction holds uncommitted counts nowhere; and
// CountExpired counts the two expired ones. After Purge none is expired,
// and the oldest record is a live one.
func TestStats(t *testing.T) {
	dbtest.ForEachWithTiDB(t, testStats)
	dbtest.ForEachVitess(t, testStats)
	dbtest.ForEachCitus(t, testStats)
}

func testStats(t *testing.T, tg target) {
	var c dbtest.Clock
	e := setup(t, tg, idem.WithClock(c.Now))
	ctx := context.Background()
	counts := func(t *testing.T, when string, live, inFlight, expired int64, oldestFrom, oldestTo time.Time) {
		t.Helper()
		st, err := e.Store.Stats(ctx, e.DB)
		if err != nil {
			t.Fatalf("Stats %s: %v", when, err)
		}
		if st.Live != live || st.InFlight != inFlight || st.Expired != expired {
			t.Errorf("Stats %s counts %d live, %d in flight, %d expired; want %d, %d, %d", when, st.Live, st.InFlight, st.Expired, live, inFlight, expired)
		}
		switch {
		case oldestFrom.IsZero() && !st.Oldest.IsZero():
			t.Errorf("Stats %s: the oldest record was claimed at %v; want none", when, st.Oldest)
		case !oldestFrom.IsZero() && (st.Oldest.UnixMicro() < oldestFrom.UnixMicro() || st.Oldest.UnixMicro() > oldestTo.UnixMicro()):
			t.Errorf("Stats %s: the oldest record was claimed at %v; want between %v and %v", when, st.Oldest, oldestFrom, oldestTo)
		}
		n, err := e.Store.CountExpired(ctx, e.DB)
		if err != nil || n != expired {
			t.Errorf("CountExpired %s = %d, %v; want %d", when, n, err, expired)
		}
	}
	claim := func(key string) {
		t.Helper()
		res, err := e.Do(t, key, dbtest.HashA, e.Effect(key, dbtest.Created), true)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
	}

	counts(t, "of an empty table", 0, 0, 0, time.Time{}, time.Time{})

	c.Advance(-2 * idem.DefaultRetention)
	before := c.Now()
	claim("a-0")
	after := c.Now()
	claim("a-1")
	c.Advance(2 * idem.DefaultRetention)
	liveFrom := c.Now()
	for i := range 3 {
		claim(fmt.Sprint("b-", i))
	}
	tx := e.Begin(t, nil)
	_, err := e.Store.Do(ctx, tx, "c-unfinished", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		return dbtest.Created, tx.Commit()
	})
	if !errors.Is(err, idem.ErrTxEnded) {
		t.Fatalf("Do with a Func that commits: %v, want ErrTxEnded", err)
	}
	liveTo := c.Now()
	var holder *sql.Tx
	if !dialect.CapabilitiesOf(tg.Dialect).OneWriter {
		holder = e.Hold(t, "d-held", dbtest.HashA, dbtest.Created)
	}
	counts(t, "of 2 expired records and 4 live ones", 4, 1, 2, before, after)
	if holder != nil {
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	}

	if n, err := e.Store.Purge(ctx, e.DB, 100); err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want the 2 expired records", n, err)
	}
	counts(t, "after Purge", 4, 1, 0, liveFrom, liveTo)
}

// TestStatsShardColumn counts the records of a table with a shard column,
// those of every shard value, on every database.
func TestStatsShardColumn(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e, orders := tg.SetupByCustomer(t, idem.WithClock(c.Now))
		ctx := context.Background()
		c.Advance(-2 * idem.DefaultRetention)
		for customer := int64(1); customer <= 3; customer++ {
			if customer == 2 {
				c.Advance(2 * idem.DefaultRetention)
			}
			sh := idem.WithShard(ctx, customer)
			for _, key := range []string{"order-a", "order-b"} {
				res, err := e.Store.DoTx(sh, e.DB, nil, key, dbtest.HashA, orders.Place(customer, key, dbtest.Created))
				dbtest.WantOutcome(t, res, err, idem.Claimed)
			}
		}
		st, err := e.Store.Stats(ctx, e.DB)
		if err != nil || st.Live != 4 || st.InFlight != 0 || st.Expired != 2 || st.Oldest.IsZero() {
			t.Errorf("Stats = %+v, %v; want 4 live records, 2 expired ones, and the oldest", st, err)
		}
		if n, err := e.Store.CountExpired(ctx, e.DB); err != nil || n != 2 {
			t.Errorf("CountExpired = %d, %v; want 2", n, err)
		}
	})
}

// uncounting is a dialect from outside the package without the statements
// that count a table.
type uncounting struct{ idem.Dialect }

func (d uncounting) Statements(table string, lockTimeout time.Duration) dialect.Statements {
	st := d.Dialect.Statements(table, lockTimeout)
	st.Stats, st.CountExpired = "", ""
	return st
}

// TestStatsRefused shows what Stats and CountExpired refuse before they send
// anything: a nil database and a Store not made by New, with
// ErrInvalidArgument, and, where the dialect has no statement that counts,
// every call, with errors.ErrUnsupported, on database/sql and on another
// driver.
func TestStatsRefused(t *testing.T) {
	ctx := context.Background()
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	var zero idem.Store
	engine := idem.EngineOf[*sql.Tx](store)
	for name, call := range map[string]func() error{
		"Stats with a nil database":               func() error { _, err := store.Stats(ctx, nil); return err },
		"CountExpired with a nil database":        func() error { _, err := store.CountExpired(ctx, nil); return err },
		"Engine.Stats with a nil database":        func() error { _, err := engine.Stats(ctx, nil); return err },
		"Engine.CountExpired with a nil database": func() error { _, err := engine.CountExpired(ctx, nil); return err },
		"Stats on a zero Store":                   func() error { _, err := zero.Stats(ctx, &sql.DB{}); return err },
		"CountExpired on a zero Store":            func() error { _, err := zero.CountExpired(ctx, &sql.DB{}); return err },
		"Engine.Stats of a zero Store":            func() error { _, err := idem.Engine[*sql.Tx]{}.Stats(ctx, unpinnable{t}); return err },
	} {
		if err := call(); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}

	plain, err := idem.New(uncounting{idem.SQLite()})
	if err != nil {
		t.Fatalf("New with a dialect that cannot count: %v", err)
	}
	if _, ok := plain.Queries()["Stats"]; ok {
		t.Error("Queries shows a Stats statement that the dialect does not have")
	}
	pe := idem.EngineOf[*sql.Tx](plain)
	for name, call := range map[string]func() error{
		"Engine.Stats":        func() error { _, err := pe.Stats(ctx, unpinnable{t}); return err },
		"Engine.CountExpired": func() error { _, err := pe.CountExpired(ctx, unpinnable{t}); return err },
	} {
		if err := call(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s with a dialect that cannot count: %v, want errors.ErrUnsupported", name, err)
		}
	}
}
