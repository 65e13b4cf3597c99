package idemtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/testhook"
)

// The properties of multi-step requests (Store.Run and Resume), which
// exercise the dialect's RunStatements, through the suite's Driver.

// skipWithoutRun skips a property of multi-step requests for a dialect
// that has no statements for them, after checking that Run answers
// ErrNoSteps for it, as its documentation says.
func skipWithoutRun(t *testing.T, s *suite) {
	t.Helper()
	if hasRun(s) {
		return
	}
	e := s.env(t)
	_, err := s.drv.Run(context.Background(), e.store, "k", hashA, s.drv.Final("f", e.effect("k", created)))
	if !errors.Is(err, idem.ErrNoSteps) {
		t.Fatalf("Run with a dialect without Run statements: %v, want ErrNoSteps", err)
	}
	t.Skip("the dialect has no statements of multi-step requests (dialect.Statements.Run is empty): Store.Run answers idem.ErrNoSteps")
}

// hasRun reports whether the suite's dialect has statements of multi-step
// requests; without them Store.Run answers idem.ErrNoSteps.
func hasRun(s *suite) bool {
	return s.d.Statements("t", time.Second).Run != (dialect.RunStatements{})
}

// request is one multi-step request of a property: a phase that writes an
// effect, a call to another system, and a final phase that writes another
// and answers created. It counts what ran.
type request struct {
	e      *env
	key    string
	phases atomic.Int32 // how many times the first phase ran
	calls  atomic.Int32
	finals atomic.Int32
	// call is the call step's function; nil succeeds at once.
	call func(ctx context.Context, callKey string) error
}

func (r *request) steps() []idem.Step {
	drv, insert := r.e.drv, r.e.effects.insertSQL()
	return []idem.Step{
		drv.Phase("reserve", func(ctx context.Context, tx Tx) error {
			r.phases.Add(1)
			_, err := tx.Exec(ctx, insert, effectKey(r.key), "reserve")
			return err
		}),
		idem.Call("charge", func(ctx context.Context, callKey string) error {
			r.calls.Add(1)
			if r.call != nil {
				return r.call(ctx, callKey)
			}
			return nil
		}),
		drv.Final("confirm", func(ctx context.Context, tx Tx) (idem.Response, error) {
			r.finals.Add(1)
			if _, err := tx.Exec(ctx, insert, effectKey(r.key), "confirm"); err != nil {
				return idem.Response{}, err
			}
			return created, nil
		}),
	}
}

// run runs the request through store with hash, on the suite's Driver.
func (r *request) run(store *idem.Store, hash []byte) (idem.Result, error) {
	return r.e.drv.Run(context.Background(), store, r.key, hash, r.steps()...)
}

// ran fails the test unless the steps ran as often as said.
func (r *request) ran(t *testing.T, phases, calls, finals int32) {
	t.Helper()
	if p, c, f := r.phases.Load(), r.calls.Load(), r.finals.Load(); p != phases || c != calls || f != finals {
		t.Errorf("the steps ran %d, %d and %d times, want %d, %d and %d", p, c, f, phases, calls, finals)
	}
}

func testRunClaimsAndReplays(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	e := s.env(t)
	r := &request{e: e, key: "k"}
	res, err := r.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Claimed)
	sameResponse(t, res.Response, created)
	again, err := r.run(e.store, hashA)
	wantOutcome(t, again, err, idem.Replay)
	sameResponse(t, again.Response, created)
	res, err = r.run(e.store, hashB)
	wantOutcome(t, res, err, idem.Mismatch)
	res, err = e.do(t, "k", hashA, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, created)
	r.ran(t, 1, 1, 1)
	e.wantEffects(t, "k", 2)
}

func testRunResumes(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	e := s.env(t)
	declined := errors.New("the provider is down")
	r := &request{e: e, key: "k", call: func(context.Context, string) error { return declined }}
	if _, err := r.run(e.store, hashA); !errors.Is(err, declined) {
		t.Fatalf("Run with a failing call: %v, want its error", err)
	}
	list, err := e.store.Unfinished(context.Background(), e.db, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Key != "k" || list[0].Phase != "reserve" || list[0].LeaseLeft > 0 {
		t.Fatalf("unfinished %+v, want k at its first phase, its lease given up", list)
	}
	res, err := e.do(t, "k", hashA, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.InFlight)

	// A retry resumes after the committed phase: the call runs again.
	r.call = nil
	res, err = r.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Claimed)
	sameResponse(t, res.Response, created)
	r.ran(t, 1, 2, 1)
	e.wantEffects(t, "k", 2)
	if list, err := e.store.Unfinished(context.Background(), e.db, 0, 10); err != nil || len(list) != 0 {
		t.Errorf("unfinished after the end: %+v, %v, want none", list, err)
	}
}

func testResume(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	e := s.env(t)
	fail := true
	r := &request{e: e, key: "k", call: func(context.Context, string) error {
		if fail {
			return errors.New("the provider is down")
		}
		return nil
	}}
	if _, err := r.run(e.store, hashA); err == nil {
		t.Fatal("Run with a failing call succeeded")
	}
	// Resume's Store runs an hour ahead, so that the request is old
	// enough for it.
	ahead := idem.WithClock(func() time.Time { return time.Now().Add(time.Hour) })
	store, err := idem.New(s.d, idem.WithTable(e.table), ahead)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(context.Context, string) ([]idem.Step, error) { return r.steps(), nil }
	rep, err := s.drv.Resume(context.Background(), store, steps)
	if err == nil || rep.Failed != 1 {
		t.Fatalf("Resume with the call failing: %+v, %v, want one failure", rep, err)
	}
	// The failure backs the request off: the next Resume leaves it alone.
	if rep, err := s.drv.Resume(context.Background(), store, steps); err != nil || rep != (idem.ResumeReport{}) {
		t.Fatalf("Resume during the back-off: %+v, %v, want nothing done", rep, err)
	}
	list, err := e.store.Unfinished(context.Background(), e.db, 0, 10)
	if err != nil || len(list) != 1 || list[0].ResumeInOlderThan(0) <= 0 {
		t.Fatalf("unfinished %+v, %v: want one request backed off", list, err)
	}
	// Past the back-off, on the database's clock, it is resumed.
	later, err := idem.New(s.movedClock(func() time.Duration { return time.Hour }), idem.WithTable(e.table), ahead)
	if err != nil {
		t.Fatal(err)
	}
	fail = false
	rep, err = s.drv.Resume(context.Background(), later, steps)
	if err != nil || rep.Finished != 1 {
		t.Fatalf("Resume after the back-off: %+v, %v, want one finished", rep, err)
	}
	r.ran(t, 1, 3, 1)
	res, err := r.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Replay)
}

// held is a request whose call step waits until the test lets it go, run
// in a goroutine of its own.
type held struct {
	*request
	inCall, release chan struct{}
	called, let     sync.Once
	done            chan error
	// callKey is the call key of its call, once hold has returned.
	callKey string
}

// hold starts a Run of a request for key on e's store, and returns once
// its call is made, or fails the test if the Run ended first. The call is
// let go at the end of the test if not before.
func hold(t *testing.T, e *env, key string) *held {
	t.Helper()
	h := &held{inCall: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
	h.request = &request{e: e, key: key, call: func(_ context.Context, callKey string) error {
		h.called.Do(func() {
			h.callKey = callKey
			close(h.inCall)
		})
		<-h.release
		return nil
	}}
	t.Cleanup(h.letGo)
	go func() {
		_, err := h.run(e.store, hashA)
		h.done <- err
	}()
	select {
	case <-h.inCall:
	case err := <-h.done:
		t.Fatalf("the Run ended before its call: %v", err)
	}
	return h
}

func (h *held) letGo() { h.let.Do(func() { close(h.release) }) }

// finish lets the call go and returns the Run's error.
func (h *held) finish() error {
	h.letGo()
	return <-h.done
}

func testRunLease(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	var offset atomic.Int64
	e := s.envOn(t, s.movedClock(func() time.Duration { return time.Duration(offset.Load()) }), idem.WithLease(time.Minute))
	first := hold(t, e, "k")

	// While the runner holds its lease, a duplicate is InFlight.
	res, err := (&request{e: e, key: "k"}).run(e.store, hashA)
	wantOutcome(t, res, err, idem.InFlight)
	if res.LeaseLeft <= 0 || res.LeaseLeft > time.Minute {
		t.Errorf("InFlight with %v of the lease left, want up to a minute", res.LeaseLeft)
	}
	res, err = e.do(t, "k", hashA, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.InFlight)

	// Once the lease has run out, by the database's clock, a retry takes
	// the request over, and holds it in the same call.
	offset.Store(int64(2 * time.Minute))
	second := hold(t, e, "k")
	second.ran(t, 0, 1, 0)

	// The first runner, when its call returns, can no longer commit a
	// phase: the request is the second's.
	if err := first.finish(); !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("the first runner after the takeover: %v, want ErrLeaseLost", err)
	}
	first.ran(t, 1, 1, 0)
	if err := second.finish(); err != nil {
		t.Errorf("the second runner: %v", err)
	}
	second.ran(t, 0, 1, 1)
	res, err = (&request{e: e, key: "k"}).run(e.store, hashA)
	wantOutcome(t, res, err, idem.Replay)
	sameResponse(t, res.Response, created)
	e.wantEffects(t, "k", 2)
}

// movedClock is the suite's dialect with the database's clock, which
// leases run on, moved by offset(): a Store that idem.New makes with it
// adds offset() to the clock in every statement that sets or compares a
// lease, the {clock_offset} of dialect.RunStatements (internal/testhook).
// A dialect whose statements forget the offset fails the properties that
// move it.
func (s *suite) movedClock(offset func() time.Duration) idem.Dialect {
	return testhook.LeaseClock{Dialect: s.d, Offset: offset}
}
