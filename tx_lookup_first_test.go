package idem

import (
	"errors"
	"sync"
	"testing"
)

// feed notes calls on r, one per element of retries, and returns whether r
// read first after each.
func feed(r *retryShare, retries ...bool) []bool {
	on := make([]bool, len(retries))
	for i, retry := range retries {
		r.note(retry)
		on[i] = r.readsFirst()
	}
	return on
}

// repeat returns n copies of retry.
func repeat(retry bool, n int) []bool {
	s := make([]bool, n)
	for i := range s {
		s[i] = retry
	}
	return s
}

// share returns r's estimate as a fraction, and the count of calls it saw.
func share(r *retryShare) (float64, uint64) {
	w := r.word.Load()
	return float64(w&retryShareMask) / retryShareOne, w >> retryShareCountShift & 0xff
}

// TestRetryShareWarmup shows that the estimate starts off, and stays off for
// the first 31 calls, however many of them were retries: after 8 replays in
// a row it is already above 0.4, and only the 32nd call turns it on.
func TestRetryShareWarmup(t *testing.T) {
	var r retryShare
	if r.readsFirst() {
		t.Fatal("a new estimate reads first")
	}
	on := feed(&r, repeat(true, 31)...)
	for i, o := range on {
		if o {
			t.Fatalf("reads first after %d replays, before the warmup of %d calls", i+1, retryShareWarmup)
		}
	}
	if est, n := share(&r); est < 0.8 || n != 31 {
		t.Fatalf("after 31 replays: estimate %.3f, %d calls; want above 0.8 (1 - (15/16)^31), 31 calls", est, n)
	}
	if !feed(&r, true)[0] {
		t.Fatal("does not read first after 32 replays")
	}
}

// TestRetryShareSwitches runs a store's estimate through the life the
// database test sees: a new key, replays until it reads first, new keys
// until it stops, with the exact calls at which it switches.
func TestRetryShareSwitches(t *testing.T) {
	var r retryShare
	on := feed(&r, false)                             // call 1: a new key
	on = append(on, feed(&r, repeat(true, 31)...)...) // calls 2 to 32: its retries
	for i, o := range on {
		if want := i+1 >= retryShareWarmup; o != want {
			t.Fatalf("after call %d: reads first %v, want %v", i+1, o, want)
		}
	}
	// 0.865 * (15/16)^16 = 0.308 is still above 0.3; one more new key
	// brings it to 0.289.
	on = feed(&r, repeat(false, 17)...)
	for i, o := range on {
		if want := i+1 < 17; o != want {
			est, _ := share(&r)
			t.Fatalf("after %d new keys: reads first %v, want %v (estimate now %.3f)", i+1, o, want, est)
		}
	}
	// Off again, it needs a share of 0.4 again: 0.289 + 0.711 * (1 -
	// (15/16)^3) = 0.41 after three retries, 0.38 after two.
	if on := feed(&r, true, true, true); on[0] || on[1] || !on[2] {
		t.Fatalf("three retries after switching off: reads first %v, want [false false true]", on)
	}
}

// TestRetryShareHysteresis feeds traffic of one retry in three, between the
// thresholds, for a long time: the estimate stays between 0.3 and 0.4, so
// the choice stays as it was, on or off, and never flaps.
func TestRetryShareHysteresis(t *testing.T) {
	third := func(r *retryShare, want bool) {
		t.Helper()
		for i := 0; i < 300; i++ {
			for j, o := range feed(r, true, false, false) {
				if o != want {
					est, _ := share(r)
					t.Fatalf("call %d of one retry in three: reads first %v, want %v (estimate %.3f)", 3*i+j+1, o, want, est)
				}
			}
		}
		if est, _ := share(r); est <= 0.3 || est >= 0.4 {
			t.Fatalf("estimate %.3f for one retry in three, want between 0.3 and 0.4", est)
		}
	}
	var on retryShare
	feed(&on, repeat(true, 40)...)
	third(&on, true)

	var off retryShare
	feed(&off, repeat(false, 40)...)
	third(&off, false)
}

// TestRetryShareBounds shows that the estimate reaches neither past 1 nor
// below 0 in fixed point, and that a long run of new keys brings it to zero.
func TestRetryShareBounds(t *testing.T) {
	var r retryShare
	feed(&r, repeat(true, 1000)...)
	if est, n := share(&r); est > 1 || est < 0.999 || n != retryShareWarmup {
		t.Fatalf("after 1000 replays: estimate %v, count %d; want just under 1, count %d", est, n, retryShareWarmup)
	}
	feed(&r, repeat(false, 1000)...)
	if est, _ := share(&r); est != 0 || r.readsFirst() {
		t.Fatalf("after 1000 new keys: estimate %v, reads first %v; want 0, false", est, r.readsFirst())
	}
}

// TestRetryShareConcurrent notes calls from many goroutines at once, while
// another reads the choice, under the race detector. When every call is of
// one kind, their order does not change the estimate, so it must equal the
// estimate of the same calls one after another: a lost update would leave
// it further from the calls' kind. The calls are few enough that the
// estimate does not reach its limit, where lost updates would not show.
func TestRetryShareConcurrent(t *testing.T) {
	const goroutines, calls, rounds = 8, 12, 50
	for _, retry := range []bool{true, false} {
		var want retryShare
		feed(&want, repeat(!retry, 200)...)
		feed(&want, repeat(retry, goroutines*calls)...)
		for round := range rounds {
			var r retryShare
			feed(&r, repeat(!retry, 200)...)
			var (
				wg, reads sync.WaitGroup
				start     = make(chan struct{})
				stop      = make(chan struct{})
			)
			reads.Add(1)
			go func() {
				defer reads.Done()
				for {
					select {
					case <-stop:
						return
					default:
						_ = r.readsFirst()
					}
				}
			}()
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for range calls {
						r.note(retry)
					}
				}()
			}
			close(start)
			wg.Wait()
			close(stop)
			reads.Wait()
			if got, w := r.word.Load(), want.word.Load(); got != w {
				ge, _ := share(&r)
				we, _ := share(&want)
				t.Fatalf("round %d, %d concurrent calls (retry %v): estimate %.5f (word %#x), want %.5f (%#x)", round, goroutines*calls, retry, ge, got, we, w)
			}
			if r.readsFirst() != retry {
				t.Fatalf("round %d, after %d concurrent calls (retry %v): reads first %v", round, goroutines*calls, retry, r.readsFirst())
			}
		}
	}
}

// TestLookupPolicy checks each policy through a Store: the default follows
// the estimate of DoTx's outcomes and ignores failed calls, the options fix
// the choice, the last of them counts, and LooksUpFirst is false for a
// Store not made by New.
func TestLookupPolicy(t *testing.T) {
	newStore := func(opts ...Option) *Store {
		t.Helper()
		s, err := New(SQLite(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	replays := func(s *Store, n int, err error) {
		for range n {
			s.noteOutcome(Result{Outcome: Replay}, err)
		}
	}

	s := newStore()
	if s.LooksUpFirst() {
		t.Error("a new default Store looks up first")
	}
	replays(s, 100, errors.New("the database is down"))
	if s.LooksUpFirst() {
		t.Error("the default Store looks up first after calls that failed")
	}
	if _, n := share(&s.retries); n != 0 {
		t.Errorf("failed calls counted: %d", n)
	}
	for range 40 {
		s.noteOutcome(Result{Outcome: Mismatch}, nil)
	}
	if !s.LooksUpFirst() {
		t.Error("the default Store does not look up first after 40 mismatches")
	}
	for _, o := range []Outcome{Claimed, InFlight} {
		for range 40 {
			s.noteOutcome(Result{Outcome: o}, nil)
		}
		if s.LooksUpFirst() {
			t.Errorf("the default Store still looks up first after 40 calls answered %v", o)
		}
		replays(s, 40, nil)
	}

	always := newStore(WithLookupFirst(LookupAlways))
	never := newStore(WithLookupFirst(LookupNever))
	for _, c := range []struct {
		name string
		s    *Store
		want bool
	}{
		{"LookupAlways", always, true},
		{"LookupNever", never, false},
		{"LookupAdaptive", newStore(WithLookupFirst(LookupAdaptive)), false},
		{"LookupNever, LookupAlways", newStore(WithLookupFirst(LookupNever), WithLookupFirst(LookupAlways)), true},
		{"LookupAlways, LookupNever", newStore(WithLookupFirst(LookupAlways), WithLookupFirst(LookupNever)), false},
	} {
		if got := c.s.LooksUpFirst(); got != c.want {
			t.Errorf("%s: LooksUpFirst %v, want %v", c.name, got, c.want)
		}
	}
	// A fixed policy keeps no estimate.
	replays(never, 100, nil)
	for range 100 {
		always.noteOutcome(Result{Outcome: Claimed}, nil)
	}
	if never.LooksUpFirst() || !always.LooksUpFirst() {
		t.Error("a fixed policy followed the traffic")
	}
	if never.retries.word.Load() != 0 || always.retries.word.Load() != 0 {
		t.Error("a fixed policy updated the estimate")
	}

	for _, p := range []LookupPolicy{LookupNever + 1, 255} {
		if _, err := New(SQLite(), WithLookupFirst(p)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("WithLookupFirst(%v): New answered %v, want ErrInvalidArgument", p, err)
		}
	}

	var nilStore *Store
	if nilStore.LooksUpFirst() || new(Store).LooksUpFirst() {
		t.Error("a Store not made by New looks up first")
	}
}
