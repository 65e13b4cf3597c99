package idemtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// The properties of call keys, through the suite's Driver: the call key
// that Run hands a Call step names one record of a key, by the incarnation
// that the dialect's claim writes, so that another system that
// deduplicates by it answers a call again for a retry of the same request
// and never for another. Two records of one key, one after the other or
// under two shard values, send two call keys; one record sends one,
// however often it is resumed or taken over.

// callKeys collects the call keys that a request's Call step was given.
type callKeys struct {
	mu   sync.Mutex
	keys []string
}

// note is a Call step's function: it notes callKey, and returns err.
func (c *callKeys) note(err error) func(context.Context, string) error {
	return func(_ context.Context, callKey string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.keys = append(c.keys, callKey)
		return err
	}
}

func (c *callKeys) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys...)
}

// distinct reports whether no two of keys are the same.
func distinct(keys []string) bool {
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// fromRecord fails the test unless callKey, which a request's call got, is
// the call key of the step charge of key's record, as an operator computes
// it from the incarnation that Lookup reads (docs/operations.md), and that
// incarnation is not zero.
func fromRecord(t *testing.T, e *env, key, callKey string) {
	t.Helper()
	res, err := e.store.Lookup(context.Background(), e.db, key)
	wantOutcome(t, res, err, idem.Replay)
	if want := (idem.Identity{Key: key, Incarnation: res.Incarnation}).CallKey("charge"); res.Incarnation == 0 || callKey != want {
		t.Errorf("%s: the call got %q, and the record holds incarnation %d, as Lookup reads it: want a nonzero one, whose call key (Identity.CallKey) is the call's", key, callKey, res.Incarnation)
	}
}

// testCallKeysPerRecord runs a key's request again after each end of its
// record: after ReleaseUndone, after Forget and after the record expired
// and a claim took it over, the new request's call gets a call key that no
// earlier request of the key got, the one of the incarnation that its
// record holds, as Lookup reads it. A claim that writes no incarnation, or
// one that keeps the old record's, fails it.
func testCallKeysPerRecord(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	c := newClock()
	e := s.env(t, idem.WithClock(c.Now), idem.WithRetention(time.Hour))
	ctx := context.Background()
	var keys callKeys
	r := &request{e: e, key: "k", call: keys.note(errors.New("the provider is down"))}
	if _, err := r.run(e.store, hashA); err == nil {
		t.Fatal("Run with a failing call succeeded")
	}
	if err := e.store.ReleaseUndone(ctx, e.db, "k"); err != nil {
		t.Fatalf("ReleaseUndone: %v", err)
	}
	r.call = keys.note(nil)
	again := func() {
		t.Helper()
		res, err := r.run(e.store, hashA)
		wantOutcome(t, res, err, idem.Claimed)
		got := keys.all()
		fromRecord(t, e, "k", got[len(got)-1])
	}
	again()
	if err := e.drv.Forget(ctx, e.store, "k"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	again()
	c.Advance(time.Hour) // the record expires
	again()
	if got := keys.all(); len(got) != 4 || !distinct(got) {
		t.Errorf("call keys %q: want 4, one for each record of the key (the first, and the next after ReleaseUndone, after Forget and after the expiry), each its own", got)
	}
}

// testCallKeysPerShardValue runs a request of two customers with one key,
// on a store with a shard column: each customer's record gives its call a
// call key of its own.
func testCallKeysPerShardValue(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	e := s.shardEnv(t)
	var keys callKeys
	for _, id := range []int64{7, 8} {
		steps := []idem.Step{
			e.drv.Phase("reserve", func(ctx context.Context, tx Tx) error {
				_, err := tx.Exec(ctx, e.orders.insertSQL(), id, effectKey("k"))
				return err
			}),
			idem.Call("charge", keys.note(nil)),
			e.drv.Final("confirm", func(context.Context, Tx) (idem.Response, error) { return created, nil }),
		}
		res, err := e.drv.Run(customer(id), e.store, "k", hashA, steps...)
		wantOutcome(t, res, err, idem.Claimed)
	}
	if got := keys.all(); len(got) != 2 || got[0] == got[1] {
		t.Errorf("call keys %q of two customers' requests with one key: want one each, each its own", got)
	}
}

// testCallKeysKept shows one record's call key kept: a retry that resumes
// a request after its call failed, a runner that takes a request over
// whose runner is alive but whose lease ran out, and Resume each give the
// call the call key that the first call got. A phase, takeover or lease
// statement that changes the incarnation fails it.
func testCallKeysKept(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	var offset atomic.Int64
	moved := s.movedClock(func() time.Duration { return time.Duration(offset.Load()) })
	e := s.envOn(t, moved, idem.WithLease(time.Minute))
	down := errors.New("the provider is down")
	var retried callKeys
	r := &request{e: e, key: "retried", call: retried.note(down)}
	if _, err := r.run(e.store, hashA); !errors.Is(err, down) {
		t.Fatalf("Run with a failing call: %v, want its error", err)
	}
	r.call = retried.note(nil)
	res, err := r.run(e.store, hashA)
	wantOutcome(t, res, err, idem.Claimed)
	if got := retried.all(); len(got) != 2 || got[0] != got[1] {
		t.Errorf("call keys %q of a request and of the retry that resumed it: want the same twice", got)
	}
	fromRecord(t, e, "retried", retried.all()[0])

	first := hold(t, e, "taken")
	offset.Store(int64(2 * time.Minute)) // the first runner's lease has run out
	second := hold(t, e, "taken")
	if err := first.finish(); !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("the first runner after the takeover: %v, want ErrLeaseLost", err)
	}
	if err := second.finish(); err != nil {
		t.Errorf("the runner that took the request over: %v", err)
	}
	if first.callKey != second.callKey {
		t.Errorf("call keys %q of a runner and %q of the runner that took its request over: want the same", first.callKey, second.callKey)
	}
	fromRecord(t, e, "taken", first.callKey)

	var resumed callKeys
	gone := &request{e: e, key: "resumed", call: resumed.note(down)}
	if _, err := gone.run(e.store, hashA); !errors.Is(err, down) {
		t.Fatalf("Run with a failing call: %v, want its error", err)
	}
	gone.call = resumed.note(nil)
	// Resume's Store runs an hour ahead, so that the request is old
	// enough for it.
	ahead, err := idem.New(moved, idem.WithTable(e.table), idem.WithClock(func() time.Time { return time.Now().Add(time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.drv.Resume(context.Background(), ahead, func(context.Context, string) ([]idem.Step, error) { return gone.steps(), nil })
	if err != nil || rep.Finished != 1 {
		t.Fatalf("Resume: %+v, %v; want one finished", rep, err)
	}
	if got := resumed.all(); len(got) != 2 || got[0] != got[1] {
		t.Errorf("call keys %q of a request and of Resume, which finished it: want the same twice", got)
	}
	fromRecord(t, e, "resumed", resumed.all()[0])
}
