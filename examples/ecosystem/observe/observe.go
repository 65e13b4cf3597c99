// Package observe names idem's events in the words that metrics and logs
// use, so that the slog, Prometheus and OpenTelemetry observers in its
// subpackages agree on them. Each subpackage returns a function for
// idem.WithObserver:
//
//   - slogobserver: one log record per call of Do or DoTx.
//   - promobserver: counters and histograms on a prometheus.Registerer.
//   - otelobserver: the same instruments from an OpenTelemetry metric.Meter.
//
// Labels must be few and fixed, or a time-series database grows without
// bound: an outcome is one of five words and an error one of five classes,
// never an error's text. For the same reason the client's scope
// (idem.Event.Scope), one per API client, goes into log records, not
// into labels.
package observe

import (
	"errors"

	"github.com/idemgo/idem"
)

// The values of Outcome. They are idem.Outcome's names, with an underscore
// where Outcome.String has a space, since some exporters treat label values
// as identifiers.
const (
	OutcomeClaimed  = "claimed"
	OutcomeReplay   = "replay"
	OutcomeMismatch = "mismatch"
	OutcomeInFlight = "in_flight"
	OutcomeError    = "error"
)

// The values of ErrorType.
const (
	// ErrorRetry is a conflict that outlasted DoTx's attempts, or that Do
	// reports for the caller to retry (idem.ErrRetry).
	ErrorRetry = "retry"
	// ErrorTooLarge is a response over the Store's limit
	// (idem.ErrResponseTooLarge): retrying fails the same way.
	ErrorTooLarge = "too_large"
	// ErrorCorrupt is a stored record that failed its checksum
	// (idem.ErrCorruptRecord): a matter for an operator, never a client.
	ErrorCorrupt = "corrupt"
	// ErrorCommitUnknown is a commit whose outcome DoTx could not settle
	// (idem.ErrCommitUnknown). It gets a class of its own because it is the
	// one error after which an effect may exist that nobody was told of.
	ErrorCommitUnknown = "commit_unknown"
	// ErrorOther is anything else: the database failing, a cancelled
	// context, the work's own error (in idemhttp, a handler's 5xx).
	ErrorOther = "other"
)

// Outcomes lists every value Outcome returns, for exporters that create
// each series at zero so that rates work from the first call.
func Outcomes() []string {
	return []string{OutcomeClaimed, OutcomeReplay, OutcomeMismatch, OutcomeInFlight, OutcomeError}
}

// ErrorTypes lists every value ErrorType returns for an error.
func ErrorTypes() []string {
	return []string{ErrorRetry, ErrorTooLarge, ErrorCorrupt, ErrorCommitUnknown, ErrorOther}
}

// Outcome returns the label of an event's result: OutcomeError when the
// call failed, and the outcome's name otherwise.
func Outcome(e idem.Event) string {
	if e.Err != nil {
		return OutcomeError
	}
	switch e.Outcome {
	case idem.Claimed:
		return OutcomeClaimed
	case idem.Replay:
		return OutcomeReplay
	case idem.Mismatch:
		return OutcomeMismatch
	case idem.InFlight:
		return OutcomeInFlight
	}
	// An outcome that a later idem adds: an error rather than a new,
	// unlisted label value.
	return OutcomeError
}

// ErrorType returns the class of an error of Do or DoTx, one of
// ErrorTypes, or "" for nil. It tests idem's sentinels with errors.Is; the
// order matters only for errors that would match two, and idem makes none.
func ErrorType(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, idem.ErrCorruptRecord):
		return ErrorCorrupt
	case errors.Is(err, idem.ErrResponseTooLarge):
		return ErrorTooLarge
	case errors.Is(err, idem.ErrCommitUnknown):
		return ErrorCommitUnknown
	case errors.Is(err, idem.ErrRetry):
		return ErrorRetry
	}
	return ErrorOther
}

// EventErrorType is ErrorType for an event, and ErrorOther for an event
// whose outcome Outcome does not know, so that OutcomeError always comes
// with a class.
func EventErrorType(e idem.Event) string {
	if e.Err == nil && Outcome(e) == OutcomeError {
		return ErrorOther
	}
	return ErrorType(e.Err)
}
