package observe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/observe"
)

func TestErrorType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("idem: commit: %w: %w", idem.ErrRetry, errors.New("database is locked")), observe.ErrorRetry},
		{fmt.Errorf("%w: 2000000 bytes", idem.ErrResponseTooLarge), observe.ErrorTooLarge},
		{fmt.Errorf("%w: checksum", idem.ErrCorruptRecord), observe.ErrorCorrupt},
		{fmt.Errorf("%w: commit: eof", idem.ErrCommitUnknown), observe.ErrorCommitUnknown},
		{context.Canceled, observe.ErrorOther},
		{errors.New("card declined"), observe.ErrorOther},
	} {
		if got := observe.ErrorType(tc.err); got != tc.want {
			t.Errorf("ErrorType(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e         idem.Event
		want      string
		wantClass string
	}{
		{idem.Event{Outcome: idem.Claimed}, observe.OutcomeClaimed, ""},
		{idem.Event{Outcome: idem.Replay}, observe.OutcomeReplay, ""},
		{idem.Event{Outcome: idem.Mismatch}, observe.OutcomeMismatch, ""},
		{idem.Event{Outcome: idem.InFlight}, observe.OutcomeInFlight, ""},
		{idem.Event{Err: idem.ErrRetry}, observe.OutcomeError, observe.ErrorRetry},
		{idem.Event{Outcome: 99}, observe.OutcomeError, observe.ErrorOther},
	} {
		if got := observe.Outcome(tc.e); got != tc.want {
			t.Errorf("Outcome(%+v) = %q, want %q", tc.e, got, tc.want)
		}
		if got := observe.EventErrorType(tc.e); got != tc.wantClass {
			t.Errorf("EventErrorType(%+v) = %q, want %q", tc.e, got, tc.wantClass)
		}
	}
}
