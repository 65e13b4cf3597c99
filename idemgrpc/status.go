package idemgrpc

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemgo/idem/internal/answer"
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

// answering is the refusal that says a, an answer of the table that
// idemhttp answers by too (internal/answer), in msg: its code, its reason
// and whether it asks for a retry are the table's, so that a client is
// told over gRPC what it is told over HTTP.
func answering(a answer.Answer, msg string) refusal {
	return refusal{code: codes.Code(a.Code), reason: a.Reason, msg: msg, retry: a.Retry}
}

var (
	refuseKeyReused = answering(answer.KeyReused,
		"idempotency key reused: it was used for a different call (another method, message or client); nothing was done; use a new key for a new call")
	refuseInFlight = answering(answer.InFlight,
		"a call with this idempotency key is still running; nothing was done for this one; retry with the same key to get its reply")
	refuseConflict = answering(answer.Conflict,
		"the call collided with concurrent ones and was undone; retry with the same key")
	refuseOutcomeUnknown = answering(answer.OutcomeUnknown,
		"the server cannot tell whether the call was saved; retry with the same key: it replays if it was and runs if it was not")
	refuseUnfinished = answering(answer.Unfinished,
		"the call stopped before it finished, perhaps after some of its steps were done; retry with the same key: it resumes where it stopped, and no step that was done is done again")
	refuseTooLarge = answering(answer.ResponseTooLarge,
		"the reply was too large to store, so the call was undone; retrying fails the same way")
	refuseRecordDamaged = answering(answer.RecordDamaged,
		"the call ran earlier, but its stored reply cannot be replayed; it is not run again")
	refuseInternal = answering(answer.InternalError,
		"a server error stopped the call before anything was kept; a later retry with the same key is safe")
	refuseClientUnknown = answering(answer.ClientUnknown,
		"the server could not tell which client the call comes from; nothing was done")
)

func refuseKeyRequired(keyName string) refusal {
	return answering(answer.KeyRequired, "this method requires an idempotency key in the "+keyName+" metadata")
}

func refuseInvalidKey(keyName, reason string) refusal {
	return answering(answer.InvalidKey, "malformed idempotency key in the "+keyName+" metadata: "+reason)
}

// refusalOf is the refusal that says a, the table's answer to an outcome
// or an error of the Runner (answer.Outcome, answer.DoTx, answer.Run).
func refusalOf(a answer.Answer) refusal {
	switch a {
	case answer.KeyReused:
		return refuseKeyReused
	case answer.InFlight:
		return refuseInFlight
	case answer.Conflict:
		return refuseConflict
	case answer.OutcomeUnknown:
		return refuseOutcomeUnknown
	case answer.Unfinished:
		return refuseUnfinished
	case answer.ResponseTooLarge:
		return refuseTooLarge
	case answer.RecordDamaged:
		return refuseRecordDamaged
	}
	return refuseInternal
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
// handler's own, as the table says (answer.DoTx).
func failure(err error) refusal { return refusalOf(answer.DoTx.Of(err)) }
