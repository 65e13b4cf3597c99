package idemgrpc

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgo/idem"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail that every
// answer of the interceptor's own carries, with one of the Reason
// constants as its reason, so that a client can tell the interceptor's
// answers from the handler's, which may use the same codes.
const ErrorDomain = "github.com/idemgo/idem"

// The reasons of the interceptor's own answers, in their ErrorInfo detail.
// docs/grpc.md in the repository says what a client should do on each.
const (
	ReasonKeyRequired      = "KEY_REQUIRED"       // InvalidArgument
	ReasonInvalidKey       = "INVALID_KEY"        // InvalidArgument
	ReasonClientUnknown    = "CLIENT_UNKNOWN"     // Unauthenticated
	ReasonKeyReused        = "KEY_REUSED"         // FailedPrecondition
	ReasonInFlight         = "IN_FLIGHT"          // Unavailable
	ReasonConflict         = "CONFLICT"           // Unavailable
	ReasonOutcomeUnknown   = "OUTCOME_UNKNOWN"    // Unavailable
	ReasonUnfinished       = "UNFINISHED"         // Unavailable
	ReasonResponseTooLarge = "RESPONSE_TOO_LARGE" // Internal
	ReasonRecordDamaged    = "RECORD_DAMAGED"     // DataLoss
	ReasonInternal         = "INTERNAL"           // Internal
)

// pushbackTrailer is the trailer in which a gRPC server tells a client's
// retry policy how long to wait before the next attempt (gRPC's retry
// design, A6). grpc-go lets servers set it as metadata.
const pushbackTrailer = "grpc-retry-pushback-ms"

// refusal is one of the interceptor's own answers.
type refusal struct {
	code   codes.Code
	reason string
	msg    string
	retry  bool // Unavailable: ask for a retry after the pushback
}

var (
	refuseKeyReused = refusal{codes.FailedPrecondition, ReasonKeyReused,
		"idempotency key reused: it was used for a different call (another method, message or client); nothing was done; use a new key for a new call", false}
	refuseInFlight = refusal{codes.Unavailable, ReasonInFlight,
		"a call with this idempotency key is still running; nothing was done for this one; retry with the same key to get its reply", true}
	refuseConflict = refusal{codes.Unavailable, ReasonConflict,
		"the call collided with concurrent ones and was undone; retry with the same key", true}
	refuseOutcomeUnknown = refusal{codes.Unavailable, ReasonOutcomeUnknown,
		"the server cannot tell whether the call was saved; retry with the same key: it replays if it was and runs if it was not", true}
	refuseUnfinished = refusal{codes.Unavailable, ReasonUnfinished,
		"the call stopped before it finished, perhaps after some of its steps were done; retry with the same key: it resumes where it stopped, and no step that was done is done again", true}
	refuseTooLarge = refusal{codes.Internal, ReasonResponseTooLarge,
		"the reply was too large to store, so the call was undone; retrying fails the same way", false}
	refuseRecordDamaged = refusal{codes.DataLoss, ReasonRecordDamaged,
		"the call ran earlier, but its stored reply cannot be replayed; it is not run again", false}
	refuseInternal = refusal{codes.Internal, ReasonInternal,
		"a server error stopped the call before anything was kept; a later retry with the same key is safe", false}
	refuseClientUnknown = refusal{codes.Unauthenticated, ReasonClientUnknown,
		"the server could not tell which client the call comes from; nothing was done", false}
)

func refuseKeyRequired(keyName string) refusal {
	return refusal{codes.InvalidArgument, ReasonKeyRequired,
		"this method requires an idempotency key in the " + keyName + " metadata", false}
}

func refuseInvalidKey(keyName, reason string) refusal {
	return refusal{codes.InvalidArgument, ReasonInvalidKey,
		"malformed idempotency key in the " + keyName + " metadata: " + reason, false}
}

// err returns the refusal's status error, with its ErrorInfo and, for a
// retry, a RetryInfo, and for a retry sets the pushback trailer on ctx's
// call. It sets no header: a gRPC client's retry policy only retries a
// response that carries trailers alone.
func (r refusal) err(ctx context.Context, keyName string, pushback time.Duration) error {
	st := status.New(r.code, r.msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{
		Reason:   r.reason,
		Domain:   ErrorDomain,
		Metadata: map[string]string{"key_metadata": keyName},
	}}
	if r.retry {
		ms := (pushback + time.Millisecond - 1) / time.Millisecond
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(ms * time.Millisecond)})
		_ = grpc.SetTrailer(ctx, metadata.Pairs(pushbackTrailer, strconv.FormatInt(int64(ms), 10)))
	}
	if withDetails, derr := st.WithDetails(details...); derr == nil {
		st = withDetails
	}
	return st.Err()
}

// failure is the refusal that answers an error of DoTx that is not the
// handler's own.
func failure(err error) refusal {
	switch {
	case errors.Is(err, idem.ErrRetry):
		return refuseConflict
	case errors.Is(err, idem.ErrCommitUnknown):
		return refuseOutcomeUnknown
	case errors.Is(err, idem.ErrResponseTooLarge):
		return refuseTooLarge
	case errors.Is(err, idem.ErrCorruptRecord):
		return refuseRecordDamaged
	}
	return refuseInternal
}
