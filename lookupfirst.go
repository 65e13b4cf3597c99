package idem

import "sync/atomic"

// lookupPolicy says when DoTx reads a key's record before it begins a
// transaction. Its zero value is the default, lookupAuto.
type lookupPolicy uint8

const (
	// lookupAuto reads first while retries of finished requests are a
	// large share of the Store's recent DoTx calls (see retryShare).
	lookupAuto lookupPolicy = iota
	// lookupAlways reads first on every call: WithLookupFirst.
	lookupAlways
	// lookupNever never reads first: WithoutLookupFirst.
	lookupNever
)

// The estimate of lookupAuto, and the thresholds it is judged by.
//
// Reading first costs a new key one statement more and saves a retry of a
// finished request its transaction. On loopback the two weigh the same
// when about 40 % of the requests are such retries (docs/performance.md);
// by round trips alone, a new key pays one and a retry saves two, so the
// break-even is one in three. DoTx starts reading first at the measured
// break-even, where it surely pays, and stops only once the share falls
// to 30 %, below the break-even by round trips, so that a share that
// hovers around either does not make the Store change path every few
// calls.
const (
	// retryShareOne is 1.0 in the fixed point of the estimate: 16
	// fractional bits. The estimate is a share, at most 1, so it always
	// fits in the 32 bits it is given.
	retryShareOne = 1 << 16
	// retryShareShift makes the weight of each call 1/16: the estimate
	// mostly reflects the last few dozen calls (a call 32 calls ago
	// weighs an eighth of the latest), and it crosses the band between
	// the thresholds in three to five consecutive calls of one kind.
	retryShareShift = 4
	// retryShareWarmup is how many DoTx calls with an outcome the Store
	// sees before it may read first. An estimate of fewer calls says
	// little, and until then the Store sends exactly what a Store made
	// WithoutLookupFirst sends, so that short tests, and sqlmock
	// expectations written for the claim alone, do not depend on the
	// share of retries among their calls.
	retryShareWarmup = 32
	// lookupOnTenths and lookupOffTenths are the thresholds, in tenths:
	// read first from an estimate of 0.4, stop at 0.3.
	lookupOnTenths  = 4
	lookupOffTenths = 3
)

// retryShare is the estimate of lookupAuto: the share of a Store's recent
// DoTx calls that were retries of finished requests (Replay or Mismatch),
// as an exponentially weighted moving average, together with the number
// of calls it has seen and the choice it made. The three live in one
// atomic word, so that the many goroutines that call DoTx at once update
// them without a lock and never see one without the others: bits 0 to 31
// hold the estimate in the fixed point of retryShareOne, bits 32 to 39
// the count of calls, which stops at retryShareWarmup, and bit 40 whether
// DoTx reads first.
type retryShare struct {
	word atomic.Uint64
}

const (
	retryShareMask       = 1<<32 - 1
	retryShareCountShift = 32
	retryShareOn         = 1 << 40
)

// readsFirst reports whether DoTx reads first now.
func (r *retryShare) readsFirst() bool {
	return r.word.Load()&retryShareOn != 0
}

// note adds one call to the estimate: a retry of a finished request or
// not. Another goroutine may update the word between the load and the
// swap; then note computes again from the newer word, so that every call
// counts exactly once. A call that changes nothing writes nothing, as in
// the steady state of traffic that is all new keys (an estimate of zero)
// or all retries, so that such traffic does not pass the word's cache
// line from core to core on every call.
func (r *retryShare) note(retry bool) {
	for {
		old := r.word.Load()
		next := nextRetryShare(old, retry)
		if next == old || r.word.CompareAndSwap(old, next) {
			return
		}
	}
}

// nextRetryShare returns the word that follows old after one more call.
func nextRetryShare(old uint64, retry bool) uint64 {
	est := int64(old & retryShareMask)
	count := old >> retryShareCountShift & 0xff
	on := old&retryShareOn != 0

	sample := int64(0)
	if retry {
		sample = retryShareOne
	}
	// est += (sample - est) / 16, rounded down. It stays within
	// [0, retryShareOne], so it fits its 32 bits: a retry adds at most
	// the distance to one, and a new key takes away at most est/16
	// rounded up, so that a run of new keys brings the estimate down to
	// zero.
	est += (sample - est) >> retryShareShift
	if count < retryShareWarmup {
		count++
	}
	if count >= retryShareWarmup {
		// Compared in tenths, exactly: est/one >= 4/10 is 10*est >= 4*one.
		switch {
		case !on && 10*est >= lookupOnTenths*retryShareOne:
			on = true
		case on && 10*est <= lookupOffTenths*retryShareOne:
			on = false
		}
	}
	w := uint64(est) | count<<retryShareCountShift
	if on {
		w |= retryShareOn
	}
	return w
}

// readFirst reports whether DoTx reads the key's record before its
// transaction on this call.
func (s *Store) readFirst() bool {
	switch s.lookupFirst {
	case lookupAlways:
		return true
	case lookupAuto:
		return s.retries.readsFirst()
	}
	return false
}

// noteOutcome feeds the answer of one DoTx call to the estimate of
// lookupAuto. A call that failed says nothing about the traffic (it may
// have been a new key or a retry) and is left out.
func (s *Store) noteOutcome(res Result, err error) {
	if s.lookupFirst != lookupAuto || err != nil {
		return
	}
	s.retries.note(res.Outcome == Replay || res.Outcome == Mismatch)
}

// LooksUpFirst reports whether DoTx, called now, would read the key's record
// before it begins a transaction: always with WithLookupFirst, never with
// WithoutLookupFirst, and by default while retries of finished requests
// have lately been a large share of the Store's DoTx calls (see
// WithLookupFirst for the rule). It is for metrics and tests: calls that
// run at the same time may change the answer of the default policy before
// the next DoTx begins. It is false for a Store not made by New.
func (s *Store) LooksUpFirst() bool {
	if s.check() != nil {
		return false
	}
	return s.readFirst()
}
