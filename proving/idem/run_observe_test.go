package idem_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// events collects the Events a Store hands its observer.
type events struct {
	mu   sync.Mutex
	list []idem.Event
}

func (ev *events) observe(_ context.Context, e idem.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.list = append(ev.list, e)
}

// take returns the events so far, as "kind step outcome" or "kind step
// error", and forgets them.
func (ev *events) take() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var got []string
	for _, e := range ev.list {
		what := e.Outcome.String()
		switch {
		case errors.Is(e.Err, idem.ErrLeaseLost):
			what = "ErrLeaseLost"
		case e.Err != nil:
			what = "error"
		}
		got = append(got, strings.Join([]string{e.Kind.String(), e.Step, what}, "|"))
	}
	ev.list = nil
	return got
}

// wantEvents checks the events so far, and that each answer of a Run (a
// call's or a resume's) counts one attempt and no claim wait, as Event's doc
// says.
func wantEvents(t *testing.T, ev *events, want ...string) {
	t.Helper()
	ev.mu.Lock()
	for _, e := range ev.list {
		if (e.Kind == idem.EventCall || e.Kind == idem.EventResume) && (e.Attempts != 1 || e.ClaimWait != 0) {
			t.Errorf("%v event of Run: Attempts %d, ClaimWait %v; want 1 and 0", e.Kind, e.Attempts, e.ClaimWait)
		}
	}
	ev.mu.Unlock()
	if got := ev.take(); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestRunObserved shows the Events of multi-step requests: one per call
// with its answer; a takeover, naming the recovery point; the lost lease
// of the runner that was taken over, naming the step that found it out;
// and Resume's resumes and compensations, which are no client's
// calls.
func TestRunObserved(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var (
			c  dbtest.Clock
			ev events
		)
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now), idem.WithLease(time.Minute), idem.WithObserver(ev.observe))
		first := &order{e: e, key: "order-20"}
		h1 := holdRun(t, first)
		second := &order{e: e, key: first.key}
		res, err := second.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.InFlight)
		wantEvents(t, &ev, "call||in flight")

		c.Advance(time.Minute + time.Second)
		h2 := holdRun(t, second)
		wantEvents(t, &ev, "takeover|order|claimed")
		if _, err := h1.finish(); !errors.Is(err, idem.ErrLeaseLost) {
			t.Errorf("the first runner: %v, want ErrLeaseLost", err)
		}
		wantEvents(t, &ev, "lease lost|charged|ErrLeaseLost", "call||ErrLeaseLost")
		res, err = h2.finish()
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		wantEvents(t, &ev, "call||claimed")

		down := errors.New("provider unreachable")
		for _, key := range []string{"order-21", "order-22"} {
			o := &order{e: e, key: key, charge: func(context.Context, string) error { return down }}
			if _, err := o.run(t, dbtest.HashA); !errors.Is(err, down) {
				t.Fatalf("Run: %v, want the provider's error", err)
			}
		}
		wantEvents(t, &ev, "call||error", "call||error")
		c.Advance(time.Hour)
		rep, err := e.Store.Resume(context.Background(), e.DB, nil, func(_ context.Context, key string) ([]idem.Step, error) {
			o := &order{e: e, key: key}
			if key == "order-22" {
				o.charge = func(context.Context, string) error { return down }
			}
			return o.steps(), nil
		}, idem.Compensate(time.Hour, func(context.Context, *sql.Tx, idem.Unfinished, error) (idem.Response, error) {
			return idem.Response{Status: 502}, nil
		}))
		if err != nil || rep.Finished != 1 || rep.Compensated != 1 {
			t.Fatalf("Resume: %+v, %v; want one finished, one compensated", rep, err)
		}
		wantEvents(t, &ev, "takeover|order|claimed", "resume||claimed",
			"takeover|order|claimed", "resume||error", "takeover|order|claimed", "compensate||claimed")
	})
}

// TestRunTxOptions shows that Run begins each of its transactions with the
// options it is given, as the driver sees them, and, on PostgreSQL, as the
// server does.
func TestRunTxOptions(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		e, ctl := lossySetup(t, tg)
		ctl.ResetBegan()
		var levels []string
		seen := func(ctx context.Context, tx *sql.Tx) error {
			if tg.Family != "postgres" {
				return nil
			}
			var level string
			if err := tx.QueryRowContext(ctx, "SHOW transaction_isolation").Scan(&level); err != nil {
				return err
			}
			levels = append(levels, level)
			return nil
		}
		opts := &sql.TxOptions{Isolation: sql.LevelSerializable}
		if strings.HasPrefix(tg.Name, "tidb") {
			opts.Isolation = sql.LevelRepeatableRead // TiDB refuses SERIALIZABLE
		}
		res, err := e.Store.Run(context.Background(), e.DB, opts, "k", dbtest.HashA,
			idem.Phase("one", seen),
			idem.Final("two", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) { return dbtest.Created, seen(ctx, tx) }))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		began := ctl.Began()
		if len(began) != 3 {
			t.Errorf("%d transactions begun, want 3: the first and one per step", len(began))
		}
		for _, o := range began {
			if o.Isolation != driver.IsolationLevel(opts.Isolation) {
				t.Errorf("a transaction began at %v, want %v", sql.IsolationLevel(o.Isolation), opts.Isolation)
			}
		}
		if tg.Family == "postgres" && !slices.Equal(levels, []string{"serializable", "serializable"}) {
			t.Errorf("the phases ran at %q, want serializable", levels)
		}
	})
}

// TestEventScope shows that every Event carries the scope of the call it
// reports, as the caller's context names it (WithScope): the answers of
// Do, DoTx and Run, a takeover and the lost lease it causes. Resume
// serves no client, and its resumes and compensations carry an empty
// scope. No Event carries the key itself, in any field.
func TestEventScope(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var (
			c  dbtest.Clock
			ev events
		)
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now), idem.WithLease(time.Minute), idem.WithObserver(ev.observe))
		bg := context.Background()
		scoped := idem.WithScope(bg, "client-a")
		const key = "order-of-a-private-key"
		res, err := e.Store.DoTx(scoped, e.DB, nil, key+"-dotx", dbtest.HashA, e.Effect(key+"-dotx", dbtest.Created))
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		tx := e.Begin(t, nil)
		res, err = e.Store.Do(scoped, tx, key+"-dotx", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		res, err = e.Store.DoTx(bg, e.DB, nil, key+"-dotx", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		wantScopes(t, &ev, key, "call|client-a", "call|client-a", "call|")

		first := &order{e: e, key: key, ctx: scoped}
		h1 := holdRun(t, first)
		c.Advance(time.Minute + time.Second)
		h2 := holdRun(t, &order{e: e, key: key, ctx: scoped})
		if _, err := h1.finish(); !errors.Is(err, idem.ErrLeaseLost) {
			t.Errorf("the first runner: %v, want ErrLeaseLost", err)
		}
		res, err = h2.finish()
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		wantScopes(t, &ev, key, "takeover|client-a", "lease lost|client-a", "call|client-a", "call|client-a")

		down := errors.New("provider unreachable")
		for _, k := range []string{key + "-resumed", key + "-compensated"} {
			o := &order{e: e, key: k, ctx: scoped, charge: func(context.Context, string) error { return down }}
			if _, err := o.run(t, dbtest.HashA); !errors.Is(err, down) {
				t.Fatalf("Run: %v, want the provider's error", err)
			}
		}
		wantScopes(t, &ev, key, "call|client-a", "call|client-a")
		c.Advance(time.Hour)
		rep, err := e.Store.Resume(bg, e.DB, nil, func(_ context.Context, k string) ([]idem.Step, error) {
			o := &order{e: e, key: k}
			if k == key+"-compensated" {
				o.charge = func(context.Context, string) error { return down }
			}
			return o.steps(), nil
		}, idem.Compensate(time.Hour, func(context.Context, *sql.Tx, idem.Unfinished, error) (idem.Response, error) {
			return idem.Response{Status: 502}, nil
		}))
		if err != nil || rep.Finished != 1 || rep.Compensated != 1 {
			t.Fatalf("Resume: %+v, %v; want one finished, one compensated", rep, err)
		}
		wantScopes(t, &ev, key, "takeover|", "resume|", "takeover|", "resume|", "takeover|", "compensate|")
	})
}

// wantScopes checks the kinds and scopes of the events so far, as "kind|scope",
// and that none of their fields holds key, and forgets them.
func wantScopes(t *testing.T, ev *events, key string, want ...string) {
	t.Helper()
	ev.mu.Lock()
	var got []string
	for _, e := range ev.list {
		got = append(got, e.Kind.String()+"|"+e.Scope)
		if s := fmt.Sprintf("%+v", e); strings.Contains(s, key) {
			t.Errorf("an event holds the key: %s", s)
		}
	}
	ev.list = nil
	ev.mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
