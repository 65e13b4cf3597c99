// Package answer is the one table of the answers that idem's adapters give
// of their own: for each outcome of a Store's DoTx and Run that is not a
// response to send, and for each error that they return, the answer, with
// its HTTP status and problem slug (idemhttp) and its gRPC code and
// ErrorInfo reason (idemgrpc). Both adapters answer through it, so that a
// client of either protocol is told the same thing for the same reason,
// and a new outcome or error is answered by both, or by neither.
//
// The texts stay the adapters' own (a problem's title and detail, a
// status's message), since they speak of headers or metadata; what a
// client acts on, the status or code, the reason, and whether to retry, is
// here. The package imports no gRPC: a code is held as its number, which
// the gRPC specification fixes, so that idemhttp, which imports it, pulls
// in no gRPC, and idemgrpc, a module of its own under this one's path, may
// import it all the same.
package answer

import (
	"errors"
	"net/http"

	"github.com/idemgo/idem"
)

// Code is a gRPC status code, as the gRPC specification numbers it
// (google.golang.org/grpc/codes.Code has the same values).
type Code uint32

// The gRPC codes of the answers.
const (
	InvalidArgument    Code = 3
	FailedPrecondition Code = 9
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

// Answer is one of the adapters' own answers, as each protocol says it.
// The zero Answer is none: the request's response, or the handler's own
// answer, goes to the client.
type Answer struct {
	// Slug names the answer in idemhttp's problem type: the fragment of
	// docs/http.md that explains it.
	Slug string
	// Reason names it in the google.rpc.ErrorInfo of idemgrpc's status.
	Reason string
	// Status is its HTTP status.
	Status int
	// Code is its gRPC status code.
	Code Code
	// Retry tells the client to send the same request again, with the same
	// key, after a delay: idemhttp's Retry-After, idemgrpc's pushback and
	// RetryInfo.
	Retry bool
}

// The answers.
var (
	// KeyRequired refuses a request without a key where one is required.
	KeyRequired = Answer{"key-required", "KEY_REQUIRED", http.StatusBadRequest, InvalidArgument, false}
	// InvalidKey refuses a malformed key, or one the API refuses.
	InvalidKey = Answer{"invalid-key", "INVALID_KEY", http.StatusBadRequest, InvalidArgument, false}
	// ClientUnknown refuses a request whose client the scope function
	// could not name. HTTP's 401 would need a challenge that only the
	// API can give; gRPC forbids PermissionDenied for a caller it cannot
	// identify.
	ClientUnknown = Answer{"client-unknown", "CLIENT_UNKNOWN", http.StatusForbidden, Unauthenticated, false}
	// KeyReused refuses a key that another request used (Mismatch).
	KeyReused = Answer{"key-reused", "KEY_REUSED", http.StatusUnprocessableEntity, FailedPrecondition, false}
	// InFlight asks to retry a request that another call holds.
	InFlight = Answer{"in-flight", "IN_FLIGHT", http.StatusConflict, Unavailable, true}
	// Conflict asks to retry a request that conflicted with others more
	// often than DoTx runs it again.
	Conflict = Answer{"conflict", "CONFLICT", http.StatusServiceUnavailable, Unavailable, true}
	// OutcomeUnknown asks to retry a request whose commit may or may not
	// have happened: the retry replays it or runs it.
	OutcomeUnknown = Answer{"outcome-unknown", "OUTCOME_UNKNOWN", http.StatusServiceUnavailable, Unavailable, true}
	// Unfinished asks to retry a multi-step request that stopped: the
	// retry resumes it.
	Unfinished = Answer{"unfinished", "UNFINISHED", http.StatusServiceUnavailable, Unavailable, true}
	// ResponseTooLarge says that the response could not be stored, and
	// the request was undone; a retry fails the same way.
	ResponseTooLarge = Answer{"response-too-large", "RESPONSE_TOO_LARGE", http.StatusInternalServerError, Internal, false}
	// RecordDamaged says that the request ran, but its stored response
	// cannot be sent back.
	RecordDamaged = Answer{"record-damaged", "RECORD_DAMAGED", http.StatusInternalServerError, DataLoss, false}
	// InternalError says that a server error stopped the request before
	// anything was kept.
	InternalError = Answer{"internal-error", "INTERNAL", http.StatusInternalServerError, Internal, false}
)

// All lists every answer, for the adapters' tests to hold each of them to
// the table.
var All = []Answer{KeyRequired, InvalidKey, ClientUnknown, KeyReused, InFlight, Conflict,
	OutcomeUnknown, Unfinished, ResponseTooLarge, RecordDamaged, InternalError}

// Outcomes answers each outcome of a Result of DoTx or Run that came with
// no error. The zero Answer is the response's own: the one this call
// stored (Claimed), or the one an earlier call stored (Replay), marked as
// a replay. InFlight's delay is at least the lease left to the request's
// runner (Result.LeaseLeft), which no retry can take over sooner.
var Outcomes = map[idem.Outcome]Answer{
	idem.Claimed:  {},
	idem.Replay:   {},
	idem.Mismatch: KeyReused,
	idem.InFlight: InFlight,
}

// Outcome returns the answer to a Result with outcome o, and false when
// the response is the answer (see Outcomes). An outcome that package idem
// does not define, which only a Runner of the service's own could return,
// is answered as InFlight, as the adapters always have: nothing says that
// the request ran, and a retry with the same key is safe.
func Outcome(o idem.Outcome) (a Answer, ok bool) {
	a, known := Outcomes[o]
	if !known {
		return InFlight, true
	}
	return a, a != Answer{}
}

// Rule answers an error that matches Err (errors.Is) with Answer.
type Rule struct {
	Err    error
	Answer Answer
}

// Rules answers the errors of one of a Store's calls.
type Rules struct {
	// Match are the rules in order: the first whose error the error
	// matches answers it, so that an error that matches two sentinels
	// gets the answer of the first.
	Match []Rule
	// Default answers an error that no rule matches: the handler's or
	// the database's own, and the sentinels of Rest.
	Default Answer
	// Rest are the sentinels of package idem that Default answers, named
	// so that each sentinel has its place in each Rules, and a new one
	// must be given one.
	Rest []error
}

// Of returns the answer to err, which is not nil.
func (r *Rules) Of(err error) Answer {
	for _, rule := range r.Match {
		if errors.Is(err, rule.Err) {
			return rule.Answer
		}
	}
	return r.Default
}

// DoTx answers the errors of DoTx, which runs a handler in a transaction
// (idemhttp's Handler, idemgrpc's interceptor for the methods of
// WithMethods): a conflict that outlasted DoTx's attempts, a lost commit,
// and a stored response that is too large or damaged each have their
// answer; anything else stopped the request before anything was kept.
var DoTx = Rules{
	Match: []Rule{
		{idem.ErrRetry, Conflict},
		{idem.ErrCommitUnknown, OutcomeUnknown},
		{idem.ErrResponseTooLarge, ResponseTooLarge},
		{idem.ErrCorruptRecord, RecordDamaged},
	},
	Default: InternalError,
	Rest: []error{
		// Arguments that the adapter or the Store refused before the
		// handler ran: a shard value missing from the context, say.
		idem.ErrInvalidArgument, idem.ErrInvalidKey, idem.ErrInvalidHash,
		// A handler that ended its transaction: the key stays unfinished
		// until an operator settles it, and the error hook is told.
		idem.ErrTxEnded,
		// Only Run returns these.
		idem.ErrLeaseLost, idem.ErrNoSteps,
		// Only the operators' calls return these.
		idem.ErrNotFound, idem.ErrKeyHeld, idem.ErrPhasesCommitted, idem.ErrKeyFinished, idem.ErrKeyUnfinished,
	},
}

// Run answers the errors of Run, which runs a multi-step request's steps
// (idemhttp's Steps, idemgrpc.Run): a lease that another call took over
// is in flight; steps that Run refused ran not at all, an internal error;
// a lost commit, and a stored response that is too large or damaged, are
// answered as for DoTx; anything else, a step's own error or a conflict
// that outlasted the retries, left the request unfinished, for a retry to
// resume.
var Run = Rules{
	Match: []Rule{
		{idem.ErrLeaseLost, InFlight},
		{idem.ErrInvalidArgument, InternalError},
		{idem.ErrNoSteps, InternalError},
		// Before ErrCommitUnknown: an error that matches both, a lost
		// commit whose lookup ran into a conflict, is unfinished, and its
		// retry resumes the request.
		{idem.ErrRetry, Unfinished},
		{idem.ErrCommitUnknown, OutcomeUnknown},
		{idem.ErrResponseTooLarge, ResponseTooLarge},
		{idem.ErrCorruptRecord, RecordDamaged},
	},
	Default: Unfinished,
	Rest: []error{
		// The adapters make keys and hashes that Run takes; a step's own
		// error may wrap these, and leaves the request unfinished as any
		// step's error does.
		idem.ErrInvalidKey, idem.ErrInvalidHash, idem.ErrTxEnded,
		// Only the operators' calls return these.
		idem.ErrNotFound, idem.ErrKeyHeld, idem.ErrPhasesCommitted, idem.ErrKeyFinished, idem.ErrKeyUnfinished,
	},
}
