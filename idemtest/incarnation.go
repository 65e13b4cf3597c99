package idemtest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// The properties of incarnations, through the suite's Driver: the claim
// that creates a record writes a nonzero incarnation, which every answer
// from the record shows (Result.Incarnation); no phase, resume or takeover
// of a live multi-step request changes it; and the request that comes
// after a Forget, a release or the expiry of a record gets another.

// incarnations holds the incarnations that a property has seen, each with
// the record it came from, so that it can want a new one to differ from
// them all.
type incarnations map[int64]string

// fresh fails the test unless res, the answer of what, carries an
// incarnation that no record seen before had, and notes it.
func (seen incarnations) fresh(t *testing.T, what string, res idem.Result) int64 {
	t.Helper()
	n := res.Incarnation
	switch {
	case n == 0:
		t.Fatalf("%s: incarnation 0: the dialect writes no incarnation into the record that its claim creates (its claim binds no {incarnation}, see dialect.Statements)", what)
	case seen[n] != "":
		t.Fatalf("%s: incarnation %d, the same as %s: a new record must get an incarnation of its own", what, n, seen[n])
	}
	seen[n] = what
	return n
}

// same fails the test unless res, the answer of what, carries want.
func same(t *testing.T, what string, res idem.Result, want int64) {
	t.Helper()
	if res.Incarnation != want {
		t.Errorf("%s: incarnation %d, want %d, the record's: only a new record gets a new incarnation", what, res.Incarnation, want)
	}
}

// testIncarnation: a claim that creates a record gives it a nonzero
// incarnation, which its replays, mismatches and lookups show; another key,
// the next request after Forget, and the takeover of the expired record
// each get a new one.
func testIncarnation(t *testing.T, s *suite) {
	ctx := context.Background()
	c := newClock()
	e := s.env(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
	seen := incarnations{}

	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	first := seen.fresh(t, "the claim of a new key", res)
	res, err = e.do(t, "k", hashA, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.Replay)
	same(t, "a replay", res, first)
	res, err = e.do(t, "k", hashB, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.Mismatch)
	same(t, "a mismatch", res, first)
	res, err = e.drv.DoTx(ctx, e.store, nil, "k", hashA, mustNotRun(t))
	wantOutcome(t, res, err, idem.Replay)
	same(t, "a replay through DoTx", res, first)
	res, err = e.store.Lookup(ctx, e.db, "k")
	wantOutcome(t, res, err, idem.Replay)
	same(t, "Lookup", res, first)

	res, err = e.drv.DoTx(ctx, e.store, nil, "other", hashA, e.effect("other", created))
	wantOutcome(t, res, err, idem.Claimed)
	other := seen.fresh(t, "the claim of another key through DoTx", res)
	res, err = e.store.Lookup(ctx, e.db, "other")
	wantOutcome(t, res, err, idem.Replay)
	same(t, "Lookup of the other key", res, other)

	if err := e.drv.Forget(ctx, e.store, "k"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	res, err = e.do(t, "k", hashB, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	afterForget := seen.fresh(t, "the claim after Forget", res)
	res, err = e.do(t, "k", hashB, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.Replay)
	same(t, "a replay of the record after Forget", res, afterForget)

	// Expired, the record is taken over by the next request, which is a
	// new one: through Do, and through DoTx.
	c.Advance(2 * time.Hour)
	res, err = e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	takenOver := seen.fresh(t, "the takeover of an expired record", res)
	res, err = e.store.Lookup(ctx, e.db, "k")
	wantOutcome(t, res, err, idem.Replay)
	same(t, "Lookup of the record taken over", res, takenOver)
	c.Advance(2 * time.Hour)
	res, err = e.drv.DoTx(ctx, e.store, nil, "k", hashA, e.effect("k", created))
	wantOutcome(t, res, err, idem.Claimed)
	seen.fresh(t, "the takeover of an expired record through DoTx", res)
}

// testRunIncarnation: a multi-step request keeps the incarnation of its
// record through its phases, a retry that resumes it, a takeover after its
// runner's lease ran out, and Resume, in every answer and in Unfinished;
// the request after ReleaseUndone or ReleaseWithoutEffect, and the one that
// takes over a finished record once it expired, get new ones.
func testRunIncarnation(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	ctx := context.Background()
	c := newClock()
	var offset atomic.Int64
	moved := s.movedClock(func() time.Duration { return time.Duration(offset.Load()) })
	e := s.envOn(t, moved, idem.WithClock(c.Now), idem.WithRetention(time.Hour), idem.WithLease(time.Minute))
	seen := incarnations{}
	down := errors.New("the provider is down")
	unfinished := func(what, key string, want int64) {
		t.Helper()
		list, err := e.store.Unfinished(ctx, e.db, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list {
			if u.Key == key {
				if u.Incarnation != want {
					t.Errorf("%s: Unfinished shows incarnation %d, want %d, the record's", what, u.Incarnation, want)
				}
				return
			}
		}
		t.Fatalf("%s: Unfinished %+v lacks %q", what, list, key)
	}

	// A request stops at its call, and a retry resumes it.
	r := &request{e: e, key: "k", call: func(context.Context, string) error { return down }}
	if _, err := r.run(e.store, hashA); !errors.Is(err, down) {
		t.Fatalf("Run with a failing call: %v, want its error", err)
	}
	res, err := e.store.Lookup(ctx, e.db, "k")
	wantOutcome(t, res, err, idem.InFlight)
	first := seen.fresh(t, "the record of a request stopped at its call", res)
	unfinished("after the first phase", "k", first)
	res, err = e.do(t, "k", hashA, mustNotRun(t), true)
	wantOutcome(t, res, err, idem.InFlight)
	same(t, "Do on the unfinished request", res, first)
	r.call = nil
	res, err = r.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Claimed)
	same(t, "the retry that resumed the request", res, first)
	res, err = r.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Replay)
	same(t, "a replay of the finished request", res, first)

	// A runner dies in its call; once its lease has run out, by the
	// database's clock, a retry takes the request over.
	h := hold(t, e, "held")
	res, err = e.store.Lookup(ctx, e.db, "held")
	wantOutcome(t, res, err, idem.InFlight)
	held := seen.fresh(t, "the record of a request in its call", res)
	offset.Store(int64(2 * time.Minute))
	second := &request{e: e, key: "held"}
	res, err = second.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Claimed)
	same(t, "the takeover of a request whose lease ran out", res, held)
	if err := h.finish(); !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("the first runner after the takeover: %v, want ErrLeaseLost", err)
	}
	res, err = e.store.Lookup(ctx, e.db, "held")
	wantOutcome(t, res, err, idem.Replay)
	same(t, "Lookup of the request taken over", res, held)

	// Resume drives a request to its end in its own record.
	stopped := &request{e: e, key: "resumed", call: func(context.Context, string) error { return down }}
	if _, err := stopped.run(e.store, hashA); !errors.Is(err, down) {
		t.Fatalf("Run with a failing call: %v, want its error", err)
	}
	res, err = e.store.Lookup(ctx, e.db, "resumed")
	wantOutcome(t, res, err, idem.InFlight)
	resumed := seen.fresh(t, "the record of a request left to Resume", res)
	stopped.call = nil
	ahead, err := idem.New(moved, idem.WithTable(e.table), idem.WithClock(func() time.Time { return c.Now().Add(time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	steps := func(context.Context, string) ([]idem.Step, error) { return stopped.steps(), nil }
	if rep, err := s.drv.Resume(ctx, ahead, steps); err != nil || rep.Finished != 1 {
		t.Fatalf("Resume: %+v, %v, want one request finished", rep, err)
	}
	res, err = e.store.Lookup(ctx, e.db, "resumed")
	wantOutcome(t, res, err, idem.Replay)
	same(t, "Lookup of the request that Resume finished", res, resumed)

	// Released with its phases undone, the key's next request is a new
	// one.
	released := &request{e: e, key: "released", call: func(context.Context, string) error { return down }}
	if _, err := released.run(e.store, hashA); !errors.Is(err, down) {
		t.Fatalf("Run with a failing call: %v, want its error", err)
	}
	res, err = e.store.Lookup(ctx, e.db, "released")
	wantOutcome(t, res, err, idem.InFlight)
	seen.fresh(t, "the record of a request to release", res)
	if err := e.store.ReleaseUndone(ctx, e.db, "released"); err != nil {
		t.Fatalf("ReleaseUndone: %v", err)
	}
	released.call = nil
	res, err = released.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Claimed)
	seen.fresh(t, "the request after ReleaseUndone", res)

	// Released before any phase committed, likewise.
	early := func(call func(context.Context, string) error) []idem.Step {
		return []idem.Step{idem.Call("charge", call), e.drv.Final("confirm", e.effect("early", created))}
	}
	if _, err := e.drv.Run(ctx, e.store, "early", hashA, early(func(context.Context, string) error { return down })...); !errors.Is(err, down) {
		t.Fatalf("Run with a failing first call: %v, want its error", err)
	}
	res, err = e.store.Lookup(ctx, e.db, "early")
	wantOutcome(t, res, err, idem.InFlight)
	seen.fresh(t, "the record of a request to release before its first phase", res)
	if err := e.store.ReleaseWithoutEffect(ctx, e.db, "early"); err != nil {
		t.Fatalf("ReleaseWithoutEffect: %v", err)
	}
	res, err = e.drv.Run(ctx, e.store, "early", hashA, early(func(context.Context, string) error { return nil })...)
	wantOutcome(t, res, err, idem.Claimed)
	seen.fresh(t, "the request after ReleaseWithoutEffect", res)

	// Expired, a finished request's record is taken over by a new one.
	c.Advance(2 * time.Hour)
	res, err = r.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Claimed)
	seen.fresh(t, "the request that took over an expired record", res)
}
