package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// leaveUnfinished runs o with its provider down, as a client that then gave
// up: the request stands after its first phase.
func leaveUnfinished(t *testing.T, o *order) {
	t.Helper()
	down := errors.New("provider unreachable")
	o.charge = func(context.Context, string) error { return down }
	if _, err := o.run(t, dbtest.HashA); !errors.Is(err, down) {
		t.Fatalf("Run: %v, want the provider's error", err)
	}
	o.charge = nil
}

// TestUnfinished lists the unfinished requests, oldest first, with their
// recovery points and leases, and leaves out the young and the finished.
func TestUnfinished(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now))
		ctx := context.Background()
		first := &order{e: e, key: "order-a"}
		leaveUnfinished(t, first)
		c.Advance(time.Minute)
		second := &order{e: e, key: "order-b"}
		leaveUnfinished(t, second)
		c.Advance(time.Minute)
		done := &order{e: e, key: "order-c"}
		res, err := done.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Claimed)

		list, err := e.Store.Unfinished(ctx, e.DB, 30*time.Second, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Key != first.key || list[1].Key != second.key {
			t.Fatalf("unfinished = %+v, want %s then %s", list, first.key, second.key)
		}
		for _, u := range list {
			if u.Phase != "order" || !u.LeaseUntil.Before(c.Now()) || u.CreatedAt.After(c.Now().Add(-time.Minute)) {
				t.Errorf("%+v: want recovery point order, lease given up, created a minute ago or more", u)
			}
		}
		if list, err := e.Store.Unfinished(ctx, e.DB, 90*time.Second, 10); err != nil || len(list) != 1 {
			t.Errorf("older than 90s: %+v, %v; want the first only", list, err)
		}
		if list, err := e.Store.Unfinished(ctx, e.DB, 0, 1); err != nil || len(list) != 1 || list[0].Key != first.key {
			t.Errorf("limit 1: %+v, %v; want the oldest", list, err)
		}
	})
}

// TestResumerFinishes leaves a request unfinished, then resumes it: the
// resumer runs the remaining steps, each phase commits once, and the
// client's retry replays the final response.
func TestResumerFinishes(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now))
		o := &order{e: e, key: "order-6"}
		leaveUnfinished(t, o)
		resume := func() (idem.ResumeReport, error) {
			return e.Store.Resume(context.Background(), e.DB, nil, func(_ context.Context, key string) ([]idem.Step, error) {
				if key != o.key {
					t.Errorf("Steps asked for %q", key)
				}
				return o.steps(), nil
			})
		}
		rep, err := resume()
		if err != nil || rep != (idem.ResumeReport{}) {
			t.Fatalf("Resume before DefaultResumeAge: %+v, %v; want nothing done", rep, err)
		}

		c.Advance(idem.DefaultResumeAge)
		rep, err = resume()
		if err != nil || rep != (idem.ResumeReport{Finished: 1}) {
			t.Fatalf("Resume: %+v, %v; want one finished", rep, err)
		}
		res, err := o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, orderResponse)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if calls := o.calls(); len(calls) != 2 || calls[0] != calls[1] {
			t.Errorf("provider called with %q, want twice with one key", calls)
		}
	})
}

// TestResumerLeavesHeldRequests shows that a request whose runner holds
// its lease is left to it, however old: Resume does not even take it.
func TestResumerLeavesHeldRequests(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now), idem.WithLease(time.Hour))
		o := &order{e: e, key: "order-7"}
		h := holdRun(t, o)
		c.Advance(idem.DefaultResumeAge)
		rep, err := e.Store.Resume(context.Background(), e.DB, nil, func(context.Context, string) ([]idem.Step, error) {
			t.Error("Steps asked for a request with a live runner")
			return nil, errors.New("must not resume")
		})
		if err != nil || rep != (idem.ResumeReport{}) {
			t.Fatalf("Resume: %+v, %v; want nothing taken", rep, err)
		}
		res, err := h.finish()
		dbtest.WantOutcome(t, res, err, idem.Claimed)
	})
}

// TestResumerCompensates keeps the provider down: the resumer leaves the
// request for later while it is young, then ends it through Compensate,
// which undoes the first phase and stores the failure that the client's
// retry then replays.
func TestResumerCompensates(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now))
		o := &order{e: e, key: "order-8"}
		leaveUnfinished(t, o)
		down := errors.New("provider still unreachable")
		failed := idem.Response{Status: http.StatusServiceUnavailable, Body: []byte("order cancelled")}
		var got []idem.Unfinished
		steps := func(context.Context, string) ([]idem.Step, error) {
			o.charge = func(context.Context, string) error { return down }
			return o.steps(), nil
		}
		compensate := idem.Compensate(time.Hour, func(ctx context.Context, tx *sql.Tx, req idem.Unfinished, cause error) (idem.Response, error) {
			got = append(got, req)
			if !errors.Is(cause, down) {
				t.Errorf("Compensate's cause: %v, want the provider's error", cause)
			}
			_, err := tx.ExecContext(ctx, "DELETE FROM "+e.Effects.Table)
			return failed, err
		})
		resume := func() (idem.ResumeReport, error) {
			return e.Store.Resume(context.Background(), e.DB, nil, steps, compensate)
		}
		c.Advance(idem.DefaultResumeAge)
		rep, err := resume()
		if !errors.Is(err, down) || !strings.Contains(err.Error(), o.key) || rep != (idem.ResumeReport{Failed: 1}) {
			t.Fatalf("Resume while young: %+v, %v; want one failed, naming the key", rep, err)
		}

		c.Advance(time.Hour) // the age given to Compensate
		rep, err = resume()
		if err != nil || rep != (idem.ResumeReport{Compensated: 1}) {
			t.Fatalf("Resume: %+v, %v; want one compensated", rep, err)
		}
		if len(got) != 1 || got[0].Key != o.key || got[0].Phase != "order" {
			t.Errorf("Compensate got %+v, want the request at step order", got)
		}
		res, err := o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, failed)
		o.wantPhases(t, map[string]int{})
		if list, err := e.Store.Unfinished(context.Background(), e.DB, 0, 10); err != nil || len(list) != 0 {
			t.Errorf("unfinished after Resume: %+v, %v", list, err)
		}
	})
}

// TestResumerNotStarved shows that requests which keep failing, more than
// one batch of them and older than one that would finish, never keep that
// one waiting: Resume that fails to finish a request backs it off, in
// its record, so that the next Resume, by another Store as after a restart,
// takes the others. The back-off starts at 10 seconds and doubles with each
// failure; Unfinished shows it, in ResumeInOlderThan of the age that
// Resume is given.
func TestResumerNotStarved(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now))
		down := errors.New("provider unreachable")
		steps := func(key string) []idem.Step {
			o := &order{e: e, key: key}
			if strings.HasPrefix(key, "failing-") {
				o.charge = func(context.Context, string) error { return down }
			}
			return o.steps()
		}
		resume := func(want idem.ResumeReport) {
			t.Helper()
			store, err := idem.New(c.Leases(tg).Dialect, idem.WithTable(e.Table), idem.WithClock(c.Now))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := store.Resume(ctx, e.DB, nil, func(_ context.Context, key string) ([]idem.Step, error) { return steps(key), nil },
				idem.ResumeBatch(2), idem.ResumeOlderThan(time.Nanosecond))
			if rep != want || (want.Failed > 0) != errors.Is(err, down) {
				t.Fatalf("Resume: %+v, %v; want %+v", rep, err, want)
			}
		}
		backedOff := func(least, most time.Duration) {
			t.Helper()
			list, err := e.Store.Unfinished(ctx, e.DB, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range list {
				in := u.ResumeInOlderThan(time.Nanosecond) // the age that resume gives
				if strings.HasPrefix(u.Key, "failing-") && (in <= least || in > most || u.LeaseLeft > 0) {
					t.Errorf("%s: resumed in %v with %v of lease left, want a back-off of %v to %v", u.Key, in, u.LeaseLeft, least, most)
				}
			}
		}
		for _, key := range []string{"failing-1", "failing-2", "failing-3", "finishing"} {
			if _, err := e.Store.Run(ctx, e.DB, nil, key, dbtest.HashA, (&order{e: e, key: key, charge: func(context.Context, string) error { return down }}).steps()...); !errors.Is(err, down) {
				t.Fatalf("Run: %v, want the provider's error", err)
			}
			c.Advance(time.Second)
			if key == "failing-3" {
				resume(idem.ResumeReport{Failed: 2})
				resume(idem.ResumeReport{Failed: 1})
			}
		}
		resume(idem.ResumeReport{Finished: 1})
		backedOff(8*time.Second, 10*time.Second)

		c.Advance(11 * time.Second)
		resume(idem.ResumeReport{Failed: 2})
		resume(idem.ResumeReport{Failed: 1})
		resume(idem.ResumeReport{})
		backedOff(18*time.Second, 20*time.Second)
	})
}

// TestResumeInIsWhenResumeTakes resumes at the moment that ResumeIn names,
// and a microsecond before it. A request listed while younger than
// DefaultResumeAge has the rest of that age as its ResumeIn: Resume with
// its defaults leaves it alone until then, and takes it at that moment, by
// the Store's clock, which the test holds still. ResumeInOlderThan names
// the moment of a Resume given ResumeOlderThan alike. A request that
// Resume failed to finish, listed once old enough, has its back-off left,
// by the database's clock, as its ResumeIn unless a longer age is asked
// for, and Resume takes it once that has passed.
func TestResumeInIsWhenResumeTakes(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		// The Store's clock stands still but when the test moves it; the
		// database's, which leases and back-offs run on, moves by as much.
		var storeNow, dbAhead atomic.Int64
		storeNow.Store(time.Now().UnixMicro())
		clock := idem.WithClock(func() time.Time { return time.UnixMicro(storeNow.Load()) })
		advance := func(d time.Duration) {
			storeNow.Add(d.Microseconds())
			dbAhead.Add(int64(d))
		}
		e := setup(t, dbtest.LeaseClock(tg, func() time.Duration { return time.Duration(dbAhead.Load()) }), clock)
		down := errors.New("provider still unreachable")
		failing := false
		steps := func(_ context.Context, key string) ([]idem.Step, error) {
			o := &order{e: e, key: key}
			if failing {
				o.charge = func(context.Context, string) error { return down }
			}
			return o.steps(), nil
		}
		resume := func(what string, want idem.ResumeReport, options ...idem.ResumeOption) {
			t.Helper()
			rep, err := e.Store.Resume(ctx, e.DB, nil, steps, options...)
			if rep != want || (want.Failed > 0) != errors.Is(err, down) {
				t.Fatalf("Resume %s: %+v, %v; want %+v", what, rep, err, want)
			}
		}
		listed := func(key string) idem.Unfinished {
			t.Helper()
			list, err := e.Store.Unfinished(ctx, e.DB, 0, 10)
			if err != nil || len(list) != 1 || list[0].Key != key {
				t.Fatalf("Unfinished: %+v, %v; want %s alone", list, err, key)
			}
			return list[0]
		}

		// A Resume given an age of its own.
		leaveUnfinished(t, &order{e: e, key: "order-a"})
		advance(10 * time.Second)
		u := listed("order-a")
		if in := u.ResumeInOlderThan(30 * time.Second); in != 20*time.Second {
			t.Fatalf("ResumeInOlderThan(30s) of a request 10s old: %v, want 20s", in)
		}
		advance(20*time.Second - time.Microsecond)
		resume("a microsecond before ResumeInOlderThan(30s)", idem.ResumeReport{}, idem.ResumeOlderThan(30*time.Second))
		advance(time.Microsecond)
		resume("at ResumeInOlderThan(30s)", idem.ResumeReport{Finished: 1}, idem.ResumeOlderThan(30*time.Second))

		// Resume with its defaults.
		leaveUnfinished(t, &order{e: e, key: "order-b"})
		advance(10 * time.Second)
		u = listed("order-b")
		if want := idem.DefaultResumeAge - 10*time.Second; u.ResumeIn != want || u.LeaseLeft > 0 {
			t.Fatalf("a request 10s old whose lease ran out: ResumeIn %v, LeaseLeft %v; want ResumeIn %v", u.ResumeIn, u.LeaseLeft, want)
		}
		advance(u.ResumeIn - time.Microsecond)
		resume("a microsecond before ResumeIn", idem.ResumeReport{})
		advance(time.Microsecond)
		resume("at ResumeIn", idem.ResumeReport{Finished: 1})

		// After a failure, the back-off.
		leaveUnfinished(t, &order{e: e, key: "order-c"})
		advance(idem.DefaultResumeAge)
		failing = true
		resume("with the provider down", idem.ResumeReport{Failed: 1})
		failing = false
		u = listed("order-c")
		if u.ResumeIn <= 0 || u.ResumeIn > 10*time.Second {
			t.Fatalf("a request DefaultResumeAge old, backed off once: ResumeIn %v, want the back-off left, up to 10s", u.ResumeIn)
		}
		if in := u.ResumeInOlderThan(2 * idem.DefaultResumeAge); in != idem.DefaultResumeAge {
			t.Errorf("ResumeInOlderThan(%v) of a request %v old, backed off for less: %v, want %v", 2*idem.DefaultResumeAge, idem.DefaultResumeAge, in, idem.DefaultResumeAge)
		}
		advance(u.ResumeIn)
		resume("at ResumeIn, past the back-off", idem.ResumeReport{Finished: 1})
	})
}
