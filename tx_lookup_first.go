package idem

import (
	"fmt"
	"sync/atomic"
)

// A LookupPolicy says when DoTx reads a key's record before it begins a
// transaction, and answers a retry of a finished request from that read
// alone: a Replay or Mismatch then costs one statement, with no transaction
// around it, and on SQLite it does not wait for the write lock. A new key
// costs that read on top of the claim and the completion. A key whose
// record is missing, held by an uncommitted transaction, unfinished or
// expired goes on to the transaction, which decides as it would without the
// read, and so does a key whose read fails. The read changes what an answer
// costs, never the answer: a transaction that finds the key held answers
// InFlight after the lock timeout, or ErrRetry after its last attempt, and
// DoTx then reads the record outside it, so that a finished record
// answers whatever the policy. That matters where another transaction
// holds a finished key only to replay it: the MySQL family's claim locks
// the record it finds until its transaction ends, and on SQLite every open
// transaction holds the write lock. A Store of
// LookupNever then answers Replay after the lock timeout (on SQLite, after
// each attempt's busy timeout), one that reads first at once
// (TestLookupPoliciesAgreeOnHeldKey). Do, which runs in the caller's
// transaction, never reads first, nor after: there it answers InFlight on
// the MySQL family. WithLookupFirst sets the policy; Store.LooksUpFirst
// reports the current choice.
//
// Reading first pays where retries of finished requests are a sizeable
// share of the requests: from about two in five on loopback, where
// docs/performance.md measures both sides, and from about one in three
// where round trips dominate, since a new key pays one round trip more and
// a retry saves two (BEGIN and ROLLBACK). Few services know their share of
// retries, and it changes: an outage is followed by a storm of them. Hence
// the default, LookupAdaptive, which decides from the DoTx calls the Store
// sees.
type LookupPolicy uint8

const (
	// LookupAdaptive, the default, reads first while retries of finished
	// requests are a large share of the Store's recent DoTx calls. The
	// Store keeps a moving average of that share, each call weighing 1/16:
	// calls answered Replay or Mismatch count as retries, whether the read
	// or the claim answered them; Claimed and InFlight count as new
	// requests; a call that fails says nothing about what it was and does
	// not count, and neither do calls of Do, which cannot read first. DoTx
	// reads first once the share reaches 40 %, the break-even measured on
	// loopback, where the read surely pays, and stops once it falls to
	// 30 %, below the break-even by round trips, so that traffic near a
	// break-even does not make it switch back and forth. It never reads
	// first before the Store has seen 32 DoTx calls with an outcome, since
	// an average of fewer says little: a short test sees the same
	// statements whatever its calls.
	LookupAdaptive LookupPolicy = iota
	// LookupAlways reads first on every DoTx call. Choose it where retries
	// are known to be frequent, or to keep a storm of retries off the write
	// path from its first request rather than from the Store's noticing
	// it; and in a test that sets sqlmock expectations for more than 32
	// DoTx calls on one Store, with the read expected before each BEGIN.
	LookupAlways
	// LookupNever never reads first: every DoTx call begins a transaction and
	// claims the key, and a retry of a finished request is answered by the
	// claim (BEGIN, the claim, ROLLBACK), or, where another transaction holds
	// the key, by a read after the transaction waited for it in vain. Choose it
	// where a new key must never cost more than its claim and its completion:
	// under LookupAdaptive, the new keys that follow a burst of retries pay the
	// read until the Store notices that the burst is over, up to some 20 calls
	// later. Choose it also in a test that sets sqlmock expectations or counts
	// statements for more than 32 DoTx calls on one Store, so that the
	// statements do not depend on the calls before.
	LookupNever
)

// String returns the constant's name.
func (p LookupPolicy) String() string {
	switch p {
	case LookupAdaptive:
		return "LookupAdaptive"
	case LookupAlways:
		return "LookupAlways"
	case LookupNever:
		return "LookupNever"
	}
	return fmt.Sprintf("LookupPolicy(%d)", uint8(p))
}

// WithLookupFirst sets when DoTx reads the key's record before its
// transaction: LookupAdaptive (the default), LookupAlways or LookupNever;
// LookupPolicy explains each and the rule of the default. Any other value
// makes New fail with an error that wraps ErrInvalidArgument.
func WithLookupFirst(p LookupPolicy) Option {
	return func(c *config) error {
		switch p {
		case LookupAdaptive, LookupAlways, LookupNever:
			c.lookupFirst = p
			return nil
		}
		return fmt.Errorf("%w: lookup policy %v, want LookupAdaptive, LookupAlways or LookupNever", ErrInvalidArgument, p)
	}
}

// The estimate of LookupAdaptive, and the thresholds it is judged by.
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
	// little, and until then the Store sends exactly what a Store of
	// LookupNever sends, so that short tests, and sqlmock
	// expectations written for the claim alone, do not depend on the
	// share of retries among their calls.
	retryShareWarmup = 32
	// lookupOnTenths and lookupOffTenths are the thresholds, in tenths:
	// read first from an estimate of 0.4, stop at 0.3.
	lookupOnTenths  = 4
	lookupOffTenths = 3
)

// retryShare is the estimate of LookupAdaptive: the share of a Store's recent
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
	case LookupAlways:
		return true
	case LookupAdaptive:
		return s.retries.readsFirst()
	}
	return false
}

// noteOutcome feeds the answer of one DoTx call to the estimate of
// LookupAdaptive. A call that failed says nothing about the traffic (it may
// have been a new key or a retry) and is left out.
func (s *Store) noteOutcome(res Result, err error) {
	if s.lookupFirst != LookupAdaptive || err != nil {
		return
	}
	s.retries.note(res.Outcome == Replay || res.Outcome == Mismatch)
}

// LooksUpFirst reports whether DoTx, called now, would read the key's record
// before it begins a transaction, under the Store's LookupPolicy. It is for
// metrics and tests: calls that run at the same time may change the answer
// of LookupAdaptive before the next DoTx begins. It is false for a Store not
// made by New.
func (s *Store) LooksUpFirst() bool {
	if s.check() != nil {
		return false
	}
	return s.readFirst()
}
