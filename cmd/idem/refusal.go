package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

// refusal is an error with which a Store's operator (Settle, the releases,
// Forget) refuses to change a key's record: the exit status it ends the
// command with, and the line that says what it means for the key and what
// to do. Each command names the refusals of its operation beside those of
// every one, so that it returns the statuses that its help lists and no
// other.
type refusal struct {
	err  error
	code int
	say  func(k *keyFlags, op string, err error) string
}

// cause is the Store's error, for the end of a line that says more.
func cause(err error) string { return strings.TrimPrefix(err.Error(), "idem: ") }

// The refusals of every operator: no live record, and a live request that
// holds the key.
var (
	refuseNoRecord = refusal{idem.ErrNotFound, exitNotFound, func(k *keyFlags, op string, _ error) string {
		return fmt.Sprintf("no live record for key %s: it was never committed, it expired, or it was purged; nothing to %s (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)", k.name(), op)
	}}
	refuseHeld = refusal{idem.ErrKeyHeld, exitHeld, func(k *keyFlags, _ string, err error) string {
		return fmt.Sprintf("a live request holds key %s: it is still running, and will finish or give up by itself; try again later (%s)", k.name(), cause(err))
	}}
)

// The refusals of some operators.
var (
	// refuseFinished is Settle's and the releases'.
	refuseFinished = refusal{idem.ErrKeyFinished, exitFinished, func(k *keyFlags, op string, _ error) string {
		return fmt.Sprintf("key %s has finished: retries get its stored response (idem inspect shows it), and there is nothing to %s", k.name(), op)
	}}
	// refusePhases is ReleaseWithoutEffect's.
	refusePhases = refusal{idem.ErrPhasesCommitted, exitPhases, func(k *keyFlags, _ string, err error) string {
		return fmt.Sprintf("key %s is a multi-step request that has committed phases, whose effects exist: nothing released; settle it, or undo what its phases and calls did and release it with -phases-undone (%s)", k.name(), cause(err))
	}}
	// refuseUnfinished is Forget's.
	refuseUnfinished = refusal{idem.ErrKeyUnfinished, exitUnfinished, func(k *keyFlags, _ string, _ error) string {
		return fmt.Sprintf("key %s has not finished, and no live request holds it: nothing forgotten; find out what its request did, then settle it (idem settle -h) or release it (idem release -h)", k.name())
	}}
)

// refused turns an error of the operator op (settle, release or forget)
// into one line with its exit status: a refusal of every operator, one of
// those that op names, or a busy database; any other error is returned as
// it is.
func refused(d *database, k *keyFlags, op string, err error, also ...refusal) error {
	for _, r := range append([]refusal{refuseNoRecord, refuseHeld}, also...) {
		if errors.Is(err, r.err) {
			return &exitCodeError{code: r.code, err: errors.New(r.say(k, op, err))}
		}
	}
	if d.dialect.Classify(err) == dialect.ErrorRetry {
		// On SQLite, a transaction that holds the key holds the whole
		// database's write lock, and BEGIN gives up after the busy timeout.
		return &exitCodeError{code: exitHeld, err: fmt.Errorf(
			"the %s database is busy, perhaps with the request that holds key %s; try again later (%s)", d.dialect.Name(), k.name(), cause(err))}
	}
	return err
}
