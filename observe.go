package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Event describes one call of Do or DoTx, for an observer set with
// WithObserver.
type Event struct {
	// Outcome is the answer; it is zero when Err is set.
	Outcome Outcome
	// Err is the error the call returned, if any.
	Err error
	// KeyHash names the key without revealing it: the first 8 bytes of
	// its SHA-256, in hex. The key itself is never in an Event, since keys
	// may carry what clients consider private.
	KeyHash string
	// ClaimWait is how long the claims took, including any wait for
	// another transaction that held the key.
	ClaimWait time.Duration
	// Duration is the whole call, fn and commit included.
	Duration time.Duration
	// Attempts is the number of transactions DoTx ran, 1 for Do. It is 0
	// when DoTx answered from the read of the key before any transaction
	// (always tried with WithLookupFirst, and by default while retries are
	// frequent; see Store.LooksUpFirst).
	Attempts int
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
	sum := sha256.Sum256([]byte(key))
	e := Event{
		Outcome:   res.Outcome,
		Err:       err,
		KeyHash:   hex.EncodeToString(sum[:8]),
		ClaimWait: wait,
		Duration:  time.Since(start),
		Attempts:  attempts,
	}
	if err != nil {
		e.Outcome = 0
	}
	for _, observe := range s.observers {
		observe(ctx, e)
	}
}
