package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Event describes one call of Do, DoTx or Run, or one moment in the life of
// a multi-step request, for an observer set with WithObserver. Kind tells
// which: an observer that counts calls counts the events of kind
// EventCall, the zero Kind, which every call has exactly one of.
type Event struct {
	// Kind says what the Event reports.
	Kind EventKind
	// Step names the step of a multi-step request that the Event is
	// about: the recovery point a takeover resumes after (empty when no
	// phase had committed), or the step that found the lease lost. It is
	// empty for the other kinds.
	Step string
	// Outcome is the answer; it is zero when Err is set.
	Outcome Outcome
	// Err is the error the call returned, if any.
	Err error
	// KeyHash names the key without revealing it: the first 8 bytes of
	// its SHA-256, in hex. The key itself is never in an Event, since keys
	// may carry what clients consider private.
	KeyHash string
	// Scope names the client whose request the Event is about, as the
	// context of the call names it (WithScope): the scope that idemhttp
	// and idemgrpc give the request, so that an operator can tell two
	// clients' requests apart in metrics and logs. It is empty where no
	// one set it: a caller without scopes, WithSingleClient, and the
	// requests that Resume drives, which no client sent (EventResume,
	// EventCompensate and their takeovers), unless Resume's own context
	// names one.
	Scope string
	// ClaimWait is how long the claims of Do or DoTx took, including any
	// wait for another transaction that held the key. It is zero for Run
	// and for the other kinds.
	ClaimWait time.Duration
	// Duration is the whole call, fn and commit included.
	Duration time.Duration
	// Attempts is the number of transactions DoTx ran, 1 for Do and for
	// Run, however many phases Run committed. It is 0 when DoTx answered
	// from the read of the key before any transaction (as the Store's
	// LookupPolicy says; see Store.LooksUpFirst).
	Attempts int
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventCall is the answer of a call of Do, DoTx or Run.
	EventCall EventKind = iota
	// EventResume is the answer of the Run that Resume made to drive
	// an unfinished request forward: Claimed when it finished the
	// request, InFlight or Replay when another call had it, or Err.
	EventResume
	// EventCompensate is the end of a request through Resume's
	// Compensate: Claimed when its failure was stored, or Err.
	EventCompensate
	// EventTakeover reports that Run took over a multi-step request whose
	// lease had run out, its runner gone or too slow, to resume it after
	// Step. Its Outcome is Claimed.
	EventTakeover
	// EventLeaseLost reports that Run found, in Step, that another call
	// had taken its request over; Err matches ErrLeaseLost, and the step
	// was rolled back. The call's own EventCall follows with the same
	// error.
	EventLeaseLost
)

// String returns the kind's name in lower case, as "call" or "lease lost".
func (k EventKind) String() string {
	switch k {
	case EventCall:
		return "call"
	case EventResume:
		return "resume"
	case EventCompensate:
		return "compensate"
	case EventTakeover:
		return "takeover"
	case EventLeaseLost:
		return "lease lost"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// startEvent returns the time a measured span starts, or the zero time when
// nobody observes, so that an unobserved Store does not read the clock.
func (s *Store) startEvent() time.Time {
	if len(s.observers) == 0 {
		return time.Time{}
	}
	return time.Now()
}

func (s *Store) since(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return time.Since(start)
}

// endEvent hands the observer the Event of a call that began at start.
func (s *Store) endEvent(ctx context.Context, start time.Time, key string, res Result, err error, wait time.Duration, attempts int) {
	if len(s.observers) == 0 {
		return
	}
	s.emit(ctx, key, Event{
		Outcome:   res.Outcome,
		Err:       err,
		ClaimWait: wait,
		Duration:  time.Since(start),
		Attempts:  attempts,
	})
}

// emit hands e, about key, to the observers, with the key's hash and the
// scope of ctx, and no outcome when it reports an error.
func (s *Store) emit(ctx context.Context, key string, e Event) {
	if len(s.observers) == 0 {
		return
	}
	sum := sha256.Sum256([]byte(key))
	e.KeyHash = hex.EncodeToString(sum[:8])
	e.Scope = scopeFrom(ctx)
	if e.Err != nil {
		e.Outcome = 0
	}
	for _, observe := range s.observers {
		observe(ctx, e)
	}
}
