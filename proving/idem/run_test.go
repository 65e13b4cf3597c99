package idem_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
	"github.com/idemgo/idem/proving/dbtest"
)

// order is a multi-step request of the tests: a phase that records the
// order, a call to a payment provider, a phase that records the charge, and
// a final phase that confirms. Each phase writes one effect row noted with
// its name; the provider counts its calls and remembers the keys it got.
type order struct {
	e   *env
	key string
	// ctx, when set, is the context of its Runs instead of Background.
	ctx context.Context
	// charge, when set, answers the provider's call instead of success.
	charge func(ctx context.Context, callKey string) error

	mu       sync.Mutex
	callKeys []string
}

var orderResponse = idem.Response{Status: http.StatusCreated, Header: http.Header{"Location": {"/orders/7"}}, Body: []byte(`{"id":7}`)}

func (o *order) phase(name string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		return o.e.Effects.Insert(ctx, tx, o.key, name)
	}
}

func (o *order) steps() []idem.Step {
	return []idem.Step{
		idem.Phase("order", o.phase("order")),
		idem.Call("charge", func(ctx context.Context, callKey string) error {
			o.mu.Lock()
			o.callKeys = append(o.callKeys, callKey)
			o.mu.Unlock()
			if o.charge != nil {
				return o.charge(ctx, callKey)
			}
			return nil
		}),
		idem.Phase("charged", o.phase("charged")),
		idem.Final("confirm", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			return orderResponse, o.phase("confirm")(ctx, tx)
		}),
	}
}

func (o *order) run(t *testing.T, hash []byte) (idem.Result, error) {
	t.Helper()
	return o.e.Store.Run(o.context(), o.e.DB, nil, o.key, hash, o.steps()...)
}

func (o *order) context() context.Context {
	if o.ctx == nil {
		return context.Background()
	}
	return o.ctx
}

// start runs o's request with steps, and hashA, in a goroutine of its own,
// and returns where its answer comes.
func (o *order) start(steps []idem.Step) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		res, err := o.e.Store.Run(o.context(), o.e.DB, nil, o.key, dbtest.HashA, steps...)
		done <- runResult{res, err}
	}()
	return done
}

// calls returns the keys the provider was called with.
func (o *order) calls() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.callKeys...)
}

// wantPhases checks that each phase of the order committed its effect
// exactly the given number of times.
func (o *order) wantPhases(t *testing.T, want map[string]int) {
	t.Helper()
	notes := o.e.Effects.Notes(t)[o.key]
	got := map[string]int{}
	for _, n := range notes {
		got[n]++
	}
	for _, name := range []string{"order", "charged", "confirm"} {
		if got[name] != want[name] {
			t.Errorf("phase %s committed %d times, want %d (all effects: %v)", name, got[name], want[name], notes)
		}
	}
}

// wantDoneOnce checks that the order's Run answered Claimed with the
// order's response, each phase committed once, and the provider was
// called once.
func (o *order) wantDoneOnce(t *testing.T, res idem.Result, err error) {
	t.Helper()
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	dbtest.SameResponse(t, res.Response, orderResponse)
	o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
	if n := len(o.calls()); n != 1 {
		t.Errorf("provider called %d times, want 1", n)
	}
}

// TestRunSteps runs a multi-step request to its end, then asks again: the
// same request replays the stored response without running a step, a
// different one is a Mismatch, and Do answers from the same record.
func TestRunSteps(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		o := &order{e: e, key: "order-1"}
		res, err := o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, orderResponse)
		if res.CreatedAt.IsZero() || !res.ExpiresAt.After(res.CreatedAt) {
			t.Errorf("created %v, expires %v", res.CreatedAt, res.ExpiresAt)
		}
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		want := idem.Identity{Key: o.key, Incarnation: res.Incarnation}.CallKey("charge")
		if calls := o.calls(); len(calls) != 1 || calls[0] != want || res.Incarnation == 0 {
			t.Errorf("provider called with %q, want once with the record's call key %q (incarnation %d)", calls, want, res.Incarnation)
		}

		res, err = o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, orderResponse)
		res, err = o.run(t, dbtest.HashB)
		dbtest.WantOutcome(t, res, err, idem.Mismatch)
		res, err = e.Do(t, o.key, dbtest.HashA, dbtest.MustNotRun(t), true)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, orderResponse)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if n := len(o.calls()); n != 1 {
			t.Errorf("provider called %d times, want 1", n)
		}
	})
}

// TestRunResumes fails the call to the provider once: Run returns its
// error with the first phase committed, and the retry resumes after it,
// calling the provider again with the same key and never running the
// committed phase again.
func TestRunResumes(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		o := &order{e: e, key: "order-2"}
		down := errors.New("provider unreachable")
		o.charge = func(context.Context, string) error { return down }
		if _, err := o.run(t, dbtest.HashA); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}
		o.wantPhases(t, map[string]int{"order": 1})

		// Given up at once: the retry need not wait for the lease.
		o.charge = nil
		res, err := o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, orderResponse)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		calls := o.calls()
		if len(calls) != 2 || calls[0] != calls[1] {
			t.Errorf("provider called with %q, want twice with one key", calls)
		}
	})
}

// TestRunFinishEarly ends a request from its call, as for a declined card:
// the response is stored and replayed, and the later phases never run.
func TestRunFinishEarly(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		o := &order{e: e, key: "order-3"}
		declined := idem.Response{Status: http.StatusPaymentRequired, Body: []byte("card declined")}
		o.charge = func(context.Context, string) error { return idem.Finish(declined) }
		res, err := o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, declined)
		res, err = o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, declined)
		o.wantPhases(t, map[string]int{"order": 1})
		if n := len(o.calls()); n != 1 {
			t.Errorf("provider called %d times, want 1", n)
		}
	})
}

// held is a call to the provider that a test holds until it lets go,
// and the Run that made it, in a goroutine of its own.
type held struct {
	inCall, release chan struct{}
	called, let     sync.Once
	done            <-chan runResult
}

type runResult struct {
	res idem.Result
	err error
}

// holdRun starts o's Run with its call held, and returns once the call is
// made. The call is let go at the end of the test if not before.
func holdRun(t *testing.T, o *order) *held {
	t.Helper()
	h := &held{inCall: make(chan struct{}), release: make(chan struct{})}
	o.charge = func(context.Context, string) error {
		h.called.Do(func() { close(h.inCall) })
		<-h.release
		return nil
	}
	t.Cleanup(h.letGo)
	h.done = o.start(o.steps())
	select {
	case <-h.inCall:
	case r := <-h.done:
		t.Fatalf("the Run ended before its call: %v, %v", r.res.Outcome, r.err)
	}
	return h
}

func (h *held) letGo() { h.let.Do(func() { close(h.release) }) }

// finish lets the call go and returns what the Run answered.
func (h *held) finish() (idem.Result, error) {
	h.letGo()
	r := <-h.done
	return r.res, r.err
}

// TestRunLease holds a request in its call: meanwhile a duplicate is
// InFlight, through Run and through Do. Once the lease has run out, a
// retry takes the request over and holds it in the same call; the first
// runner, when its call returns, can no longer commit a phase; the second
// finishes the request from its recovery point.
func TestRunLease(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now), idem.WithLease(time.Minute))
		first := &order{e: e, key: "order-4"}
		h1 := holdRun(t, first)

		second := &order{e: e, key: first.key}
		res, err := second.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.InFlight)
		if res.LeaseLeft <= 50*time.Second || res.LeaseLeft > time.Minute {
			t.Errorf("InFlight with %v of the lease left, want about a minute", res.LeaseLeft)
		}
		res, err = e.Do(t, first.key, dbtest.HashA, dbtest.MustNotRun(t), true)
		dbtest.WantOutcome(t, res, err, idem.InFlight)
		res, err = second.run(t, dbtest.HashB)
		dbtest.WantOutcome(t, res, err, idem.Mismatch)

		c.Advance(time.Minute + time.Second)
		h2 := holdRun(t, second)
		if _, err := h1.finish(); !errors.Is(err, idem.ErrLeaseLost) {
			t.Errorf("the first runner's Run: %v, want ErrLeaseLost", err)
		}
		res, err = h2.finish()
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, orderResponse)
		second.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if k1, k2 := first.calls(), second.calls(); len(k1) != 1 || len(k2) != 1 || k1[0] != k2[0] {
			t.Errorf("call keys %q and %q, want one call each with one key", k1, k2)
		}
	})
}

// TestRunRetention shows that an unfinished request outlives the retention
// window: Purge leaves it, and Do does not take its key over; once it
// finishes, it is kept for the retention window from then, and purged after.
func TestRunRetention(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		var c dbtest.Clock
		e := setup(t, c.Leases(tg), idem.WithClock(c.Now), idem.WithRetention(time.Hour))
		o := &order{e: e, key: "order-5"}
		down := errors.New("provider unreachable")
		o.charge = func(context.Context, string) error { return down }
		if _, err := o.run(t, dbtest.HashA); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}

		c.Advance(48 * time.Hour)
		if n, err := e.Store.Purge(context.Background(), e.DB, 100); err != nil || n != 0 {
			t.Fatalf("Purge: %d, %v; want the unfinished request left alone", n, err)
		}
		res, err := e.Do(t, o.key, dbtest.HashA, dbtest.MustNotRun(t), true)
		dbtest.WantOutcome(t, res, err, idem.InFlight)

		o.charge = nil
		res, err = o.run(t, dbtest.HashA)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		if want := c.Now().Add(time.Hour); res.ExpiresAt.Before(want.Add(-time.Minute)) || res.ExpiresAt.After(want) {
			t.Errorf("expires at %v, want the retention from the finish, %v", res.ExpiresAt, want)
		}
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})

		c.Advance(2 * time.Hour)
		if n, err := e.Store.Purge(context.Background(), e.DB, 100); err != nil || n != 1 {
			t.Fatalf("Purge: %d, %v; want the finished request purged", n, err)
		}
	})
}

// TestRunInvalid shows the errors of Run's arguments.
func TestRunInvalid(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	phase := func(context.Context, *sql.Tx) error { return nil }
	final := func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, nil }
	for name, steps := range map[string][]idem.Step{
		"none":            nil,
		"zero step":       {{}, idem.Final("f", final)},
		"no final":        {idem.Phase("a", phase)},
		"final not last":  {idem.Final("f", final), idem.Phase("a", phase)},
		"same names":      {idem.Phase("a", phase), idem.Final("a", final)},
		"empty name":      {idem.Final("", final)},
		"name with space": {idem.Final("a b", final)},
	} {
		if _, err := store.Run(context.Background(), db, nil, "k", dbtest.HashA, steps...); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	custom, err := idem.New(withoutRun{idem.SQLite()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := custom.Run(context.Background(), db, nil, "k", dbtest.HashA, idem.Final("f", final)); !errors.Is(err, idem.ErrNoSteps) {
		t.Errorf("a dialect without Run statements: %v, want ErrNoSteps", err)
	}
}

// TestRunStepsOfAnotherDriver gives Run steps, and Resume a Compensate,
// whose transaction is not the driver's: each is refused with
// ErrInvalidArgument before a statement, naming both types, whether the
// step's is a pointer or an interface.
func TestRunStepsOfAnotherDriver(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	final := idem.Final("f", func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, nil })
	for _, c := range []struct {
		step idem.Step
		want string
	}{
		{idem.Phase("conn", func(context.Context, *sql.Conn) error { return nil }), `step "conn" takes a transaction of type *sql.Conn, and the request runs on a driver whose transactions are *sql.Tx`},
		{idem.Phase("iface", func(context.Context, driver.Tx) error { return nil }), `step "iface" takes a transaction of type driver.Tx, and the request runs on a driver whose transactions are *sql.Tx`},
	} {
		_, err := store.Run(ctx, db, nil, "k", dbtest.HashA, c.step, final)
		if !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run with a step of another driver: %v, want ErrInvalidArgument saying %q", err, c.want)
		}
	}
	compensate := idem.Compensate(time.Hour, func(context.Context, driver.Tx, idem.Unfinished, error) (idem.Response, error) {
		return idem.Response{}, nil
	})
	steps := func(context.Context, string) ([]idem.Step, error) { return []idem.Step{final}, nil }
	want := "Compensate takes a transaction of type driver.Tx, and Resume runs on a driver whose transactions are *sql.Tx"
	if _, err := store.Resume(ctx, db, nil, steps, compensate); !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("Resume with a Compensate of another driver: %v, want ErrInvalidArgument saying %q", err, want)
	}
}

// withoutRun is a dialect that leaves its Run statements empty.
type withoutRun struct{ idem.Dialect }

func (d withoutRun) Statements(table string, lockTimeout time.Duration) dialect.Statements {
	st := d.Dialect.Statements(table, lockTimeout)
	st.Run = dialect.RunStatements{}
	return st
}

// TestCallKey pins the derivation of the keys sent to other systems, which
// services compute on their own and must never change.
func TestCallKey(t *testing.T) {
	sum := sha256.Sum256([]byte("order-1\x00charge"))
	if got, want := idem.CallKey("order-1", "charge"), "idem-"+hex.EncodeToString(sum[:16]); got != want {
		t.Fatalf("CallKey = %q, want %q", got, want)
	}
	if idem.CallKey("a", "bc") == idem.CallKey("ab", "c") {
		t.Error("CallKey runs the key into the step name")
	}
}

// TestRunPhaseTransactionEnded ends a phase's transaction on the server
// under it, as a deadlock does on the MySQL family and an interrupted
// statement on SQLite: the transaction's writes are undone, and what
// follows runs in autocommit. The phase must not move the recovery point
// then; it runs again, and its effect is committed once.
func TestRunPhaseTransactionEnded(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		o := &order{e: e, key: "order-9"}
		steps := o.steps()
		attempts := 0
		steps[0] = idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
			attempts++
			if err := o.phase("order")(ctx, tx); err != nil {
				return err
			}
			if attempts == 1 {
				_, err := tx.ExecContext(ctx, "ROLLBACK")
				return err
			}
			return nil
		})
		res, err := e.Store.Run(context.Background(), e.DB, nil, o.key, dbtest.HashA, steps...)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		if attempts != 2 {
			t.Errorf("the phase ran %d times, want 2", attempts)
		}
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
	})
}

// TestRunLeaseOneClock shows that leases run on the database's clock: a
// Store whose own clock runs minutes ahead of the runner's, or behind it,
// never takes a live request over, through Run, Resume or Settle, and
// sees the lease run out only when the database's clock says so.
func TestRunLeaseOneClock(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		e := setup(t, tg, idem.WithLease(time.Minute))
		o := &order{e: e, key: "order-30"}
		h := holdRun(t, o)
		for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute} {
			var db dbtest.Clock
			other, err := idem.New(db.Leases(tg).Dialect, idem.WithTable(e.Table), idem.WithLease(time.Minute),
				idem.WithClock(func() time.Time { return time.Now().Add(skew) }))
			if err != nil {
				t.Fatal(err)
			}
			retry := &order{e: e, key: o.key}
			res, err := other.Run(ctx, e.DB, nil, retry.key, dbtest.HashA, retry.steps()...)
			dbtest.WantOutcome(t, res, err, idem.InFlight)
			if err := other.Settle(ctx, e.DB, o.key, orderResponse); !errors.Is(err, idem.ErrKeyHeld) {
				t.Errorf("Settle by a clock %v off: %v, want ErrKeyHeld", skew, err)
			}
			steps := func(context.Context, string) ([]idem.Step, error) { return retry.steps(), nil }
			// A clock behind sees the request as not yet created, too
			// young to resume; one ahead sees it, with its lease live.
			if rep, err := other.Resume(ctx, e.DB, nil, steps, idem.ResumeOlderThan(time.Nanosecond)); err != nil || rep != (idem.ResumeReport{}) {
				t.Errorf("Resume by a clock %v off: %+v, %v; want the request left to its runner", skew, rep, err)
			}
			if list, err := other.Unfinished(ctx, e.DB, 0, 10); skew > 0 && (err != nil || len(list) != 1 || list[0].LeaseLeft < 50*time.Second) {
				t.Errorf("Unfinished by a clock %v off: %+v, %v; want the lease live for about a minute", skew, list, err)
			}
			if n := len(retry.calls()); n != 0 {
				t.Errorf("a clock %v off called the provider %d times", skew, n)
			}
		}
		res, err := h.finish()
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
		if n := len(o.calls()); n != 1 {
			t.Errorf("provider called %d times, want 1", n)
		}
	})
}
