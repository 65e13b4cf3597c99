// Package slogobserver logs each call of idem's Do and DoTx with log/slog.
//
//	store, err := idem.New(idem.Postgres(), idem.WithObserver(slogobserver.New(logger)))
package slogobserver

import (
	"context"
	"log/slog"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/observe"
)

// Message is the message of every record, so that one search finds them all;
// what happened is in the attributes.
const Message = "idempotency key"

// Level returns the level of an event's record. The levels follow who needs
// to act:
//
//   - Error for a failed call: the request did not happen, and the client
//     got a 5xx.
//   - Warn for Mismatch and InFlight: the service is fine, but a client
//     reuses keys for different requests (a bug, or someone probing) or
//     retries before its first request ends. A few are noise; many are a
//     client to talk to.
//   - Info for Replay: a client lost a response and retried, which is what
//     idem is for. Their rate tells how often responses are lost.
//   - Debug for Claimed: every first request, as many as the service's
//     writes; the access log already has them.
func Level(e idem.Event) slog.Level {
	switch {
	case e.Err != nil:
		return slog.LevelError
	case e.Outcome == idem.Mismatch, e.Outcome == idem.InFlight:
		return slog.LevelWarn
	case e.Outcome == idem.Replay:
		return slog.LevelInfo
	case e.Outcome == idem.Claimed:
		return slog.LevelDebug
	}
	return slog.LevelError // an outcome this package does not know
}

// New returns an observer for idem.WithObserver that writes one record per
// call to logger (slog.Default() if nil), at the level Level gives, with
// these attributes:
//
//   - outcome: claimed, replay, mismatch or in_flight; "error" on failure,
//     with error (the error's text) and error_type (see observe.ErrorType).
//   - key_hash: the Event's hash of the key. The key itself is never
//     logged: clients may put in it what they consider private.
//   - scope: the client's scope (idem.Event.Scope), which idemhttp and
//     idemgrpc name, when the call has one: with key_hash, it tells two
//     clients' requests apart.
//   - claim_wait and duration, as durations, and attempts.
//   - kind and step, for the Events of multi-step requests that are not
//     calls (see idem.EventKind).
//
// The record carries the call's context, so a handler that adds a trace
// or request id from the context finds it.
func New(logger *slog.Logger) func(context.Context, idem.Event) {
	if logger == nil {
		logger = slog.Default()
	}
	return func(ctx context.Context, e idem.Event) {
		level := Level(e)
		if !logger.Enabled(ctx, level) {
			return // skip building attributes no one will see
		}
		attrs := make([]slog.Attr, 0, 10)
		if e.Kind != idem.EventCall {
			attrs = append(attrs, slog.String("kind", e.Kind.String()), slog.String("step", e.Step))
		}
		attrs = append(attrs, slog.String("outcome", observe.Outcome(e)))
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()), slog.String("error_type", observe.ErrorType(e.Err)))
		}
		attrs = append(attrs, slog.String("key_hash", e.KeyHash))
		if e.Scope != "" {
			attrs = append(attrs, slog.String("scope", e.Scope))
		}
		attrs = append(attrs,
			slog.Duration("claim_wait", e.ClaimWait),
			slog.Duration("duration", e.Duration),
			slog.Int("attempts", e.Attempts),
		)
		logger.LogAttrs(ctx, level, Message, attrs...)
	}
}
