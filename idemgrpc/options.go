package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/idemgo/idem"
)

// Defaults of the interceptor's options.
const (
	// DefaultKeyMetadata is the request metadata key that carries the
	// idempotency key unless WithKeyMetadata says otherwise: the HTTP
	// header of the IETF draft, spelt as gRPC spells metadata keys.
	DefaultKeyMetadata = "idempotency-key"

	// DefaultRetryPushback is the delay that the interceptor's Unavailable
	// answers ask a client's retry policy to wait, unless WithRetryPushback
	// says otherwise. One second matches the Store's default lock timeout:
	// most calls finish within it.
	DefaultRetryPushback = time.Second
)

// An Option configures the interceptor made by UnaryServerInterceptor. Each
// option checks its own argument, and UnaryServerInterceptor reports every
// bad one.
type Option func(*config) error

type config struct {
	keyName  string
	methods  map[string]*method // WithMethods, resolved
	steps    map[string]*method // WithStepMethods, resolved
	filter   func(fullMethod string) bool
	required bool
	scope    func(context.Context) (string, error)
	scoped   bool // WithScope was given
	single   bool // WithSingleClient was given
	stored   map[codes.Code]bool
	pushback time.Duration
	onError  func(ctx context.Context, fullMethod string, err error)
}

func defaultConfig() config {
	return config{keyName: DefaultKeyMetadata, pushback: DefaultRetryPushback}
}

// WithKeyMetadata sets the request metadata key that carries the
// idempotency key. The default is DefaultKeyMetadata, "idempotency-key".
// gRPC metadata keys are case-insensitive, so name is taken in lower case;
// it must be a valid metadata key of ASCII letters, digits, '-', '_' and
// '.', not a binary one (ending in "-bin"), and one that gRPC leaves to the
// application: not a pseudo-header (":authority"), not one that gRPC
// reserves ("grpc-..."), and not one that grpc-go sends, drops or fills in
// itself (content-type, user-agent, te, host, connection), under which a
// client's key would never arrive, or every call of a client would arrive
// with the same one.
func WithKeyMetadata(name string) Option {
	return func(c *config) error {
		name, err := keyMetadataName(name)
		if err != nil {
			return err
		}
		c.keyName = name
		return nil
	}
}

// WithMethods sets the methods the interceptor protects, by their full
// names as gRPC gives them to interceptors: "/package.Service/Method".
// Calls of other methods pass straight through, and Tx returns nil for
// them. Each method must be a unary method of a service whose descriptor
// is registered in protoregistry.GlobalFiles, as generated code registers
// it: the interceptor finds the method's reply type there, to replay a
// stored reply as a message of that type even after a restart. An unknown
// or streaming method is an error. A later WithMethods replaces an earlier
// one.
//
// One of WithMethods, WithMethodFilter and WithStepMethods is required:
// gRPC has no method that is unsafe by definition, as HTTP's POST is, so
// the service must say which of its methods have effects.
func WithMethods(fullMethods ...string) Option {
	return func(c *config) error {
		ms, err := resolveAll(fullMethods)
		if err != nil {
			return err
		}
		c.methods = ms
		return nil
	}
}

// WithStepMethods sets the methods whose calls are multi-step requests
// (idem.Store.Run): the methods whose handlers call Run with the call's
// steps, by their full names, as for WithMethods. The interceptor protects
// them as well as those of WithMethods or WithMethodFilter, but begins no
// transaction for them, and Tx returns nil in their handlers; a call of
// one must carry a key, whatever WithKeyRequired says, since a multi-step
// request lives in the record of its key. A method may not be in both
// WithMethods and WithStepMethods; one that a WithMethodFilter accepts is
// served as a multi-step one. A later WithStepMethods replaces an earlier
// one.
func WithStepMethods(fullMethods ...string) Option {
	return func(c *config) error {
		ms, err := resolveAll(fullMethods)
		if err != nil {
			return err
		}
		c.steps = ms
		return nil
	}
}

// resolveAll resolves the methods of WithMethods or WithStepMethods.
func resolveAll(fullMethods []string) (map[string]*method, error) {
	if len(fullMethods) == 0 {
		return nil, fmt.Errorf("idemgrpc: no methods: %w", idem.ErrInvalidArgument)
	}
	ms := make(map[string]*method, len(fullMethods))
	var errs []error
	for _, name := range fullMethods {
		m, err := resolve(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", err, idem.ErrInvalidArgument))
			continue
		}
		ms[name] = m
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ms, nil
}

// WithMethodFilter sets a function that tells, from a method's full name
// ("/package.Service/Method"), whether the interceptor protects it. Calls
// of methods it refuses pass straight through, and Tx returns nil for
// them. It is called on every call, so keep it quick. A later
// WithMethodFilter replaces an earlier one; WithMethods and
// WithMethodFilter together are an error.
//
// Unlike WithMethods, a filter cannot be checked at start-up: the first
// call of each method it accepts looks the method up in
// protoregistry.GlobalFiles, and a method that is not there, or streams,
// fails its calls with Internal (and the ErrorHook is told why) rather than
// run unprotected. Prefer WithMethods where the list is known.
func WithMethodFilter(protect func(fullMethod string) bool) Option {
	return func(c *config) error {
		if protect == nil {
			return fmt.Errorf("idemgrpc: nil method filter: %w", idem.ErrInvalidArgument)
		}
		c.filter = protect
		return nil
	}
}

// WithKeyRequired makes a call of a protected method without a key fail
// with InvalidArgument. Without it, such a call runs without idempotency:
// the handler runs once per call, and Tx returns nil, so the handler must
// open its own transaction or refuse. Methods whose effect must not happen
// twice should require a key.
func WithKeyRequired() Option {
	return func(c *config) error {
		c.required = true
		return nil
	}
}

// WithScope sets the function that names the client a call comes from,
// from the call's context: a tenant, an account, the identity of a client
// certificate or of a token that an authentication interceptor put there.
// The scope is part of the stored key and of the call's fingerprint, so
// clients that choose the same key never meet: one cannot replay, block or
// probe another's call.
//
// UnaryServerInterceptor requires either WithScope or WithSingleClient, so
// that no service shares keys between its clients by omission.
//
// A scope function that fails, or returns an empty scope, fails the call
// with Unauthenticated before anything is stored; its error goes to the
// ErrorHook, never to the client. Put authentication in front of the
// interceptor, in the chain, so that its own refusals come first.
func WithScope(scope func(ctx context.Context) (string, error)) Option {
	return func(c *config) error {
		c.scoped = true // chosen, even if scope is refused: one error is enough
		if scope == nil {
			return fmt.Errorf("idemgrpc: nil scope function: %w", idem.ErrInvalidArgument)
		}
		c.scope = scope
		return nil
	}
}

// WithSingleClient declares that keys need no scope, because the service
// has a single client, or because its keys are random and secret, so that
// no client can guess or learn another's. Keys are then global: two clients
// that send the same key share its record, and the second gets the first
// one's reply, Unavailable or FailedPrecondition. It exists so that leaving
// the scope out is a decision written in the code, not an oversight;
// UnaryServerInterceptor refuses it together with WithScope.
func WithSingleClient() Option {
	return func(c *config) error {
		c.single = true
		return nil
	}
}

// storableCodes are the codes WithStoredErrors accepts: those of a final
// answer about the request itself. The others say that the call did not
// get an answer (Canceled, DeadlineExceeded, Unavailable, Aborted,
// ResourceExhausted), that something broke (Unknown, Internal, DataLoss),
// or that the client was not known (Unauthenticated); replaying any of
// them would refuse every retry for good over something a retry should get
// another chance at.
var storableCodes = map[codes.Code]bool{
	codes.InvalidArgument:    true,
	codes.NotFound:           true,
	codes.AlreadyExists:      true,
	codes.PermissionDenied:   true,
	codes.FailedPrecondition: true,
	codes.OutOfRange:         true,
	codes.Unimplemented:      true,
}

// WithStoredErrors makes the handler's errors with one of the given codes
// final: the status (code, message and details) is stored with whatever
// the handler wrote in Tx, the transaction commits, and every retry gets
// the same error back, marked as a replay. Only InvalidArgument, NotFound,
// AlreadyExists, PermissionDenied, FailedPrecondition, OutOfRange and
// Unimplemented may be stored; any other code is an error.
//
// By default no error is stored: a handler's error rolls the transaction
// back, reaches the client as it is, and a retry runs the handler again.
// Store the errors that depend on state, such as a declined payment or a
// sold-out item, when a retry must not succeed where the first call
// failed. A handler that returns a stored error should refuse before it
// writes, or undo its writes itself, since they commit with the error.
// A later WithStoredErrors replaces an earlier one.
func WithStoredErrors(cs ...codes.Code) Option {
	return func(c *config) error {
		set := make(map[codes.Code]bool, len(cs))
		for _, code := range cs {
			if !storableCodes[code] {
				return fmt.Errorf("idemgrpc: %v is not a final answer and cannot be stored: %w", code, idem.ErrInvalidArgument)
			}
			set[code] = true
		}
		c.stored = set
		return nil
	}
}

// WithRetryPushback sets the delay that the interceptor's Unavailable
// answers (in flight, conflict, outcome unknown) ask for: as the
// grpc-retry-pushback-ms trailer, which gRPC clients with a retry policy
// for UNAVAILABLE honour, and as the retry delay of a
// google.rpc.RetryInfo detail. It is rounded up to whole milliseconds. The
// default is DefaultRetryPushback, one second. It must be positive.
func WithRetryPushback(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idemgrpc: retry pushback must be positive, got %v: %w", d, idem.ErrInvalidArgument)
		}
		c.pushback = d
		return nil
	}
}

// WithErrorHook sets a function that is told about the errors behind the
// interceptor's own Internal, Unavailable, DataLoss and Unauthenticated
// answers: database errors, a failed scope function, a method that a filter
// accepts but the registry does not know. It is told too of a handler that
// ended its transaction itself (idem.ErrTxEnded), whatever the handler
// answered, since the key then waits for an operator. The interceptor logs
// nothing itself. The hook runs on the call's goroutine before the
// interceptor answers; keep it quick.
func WithErrorHook(hook func(ctx context.Context, fullMethod string, err error)) Option {
	return func(c *config) error {
		if hook == nil {
			return fmt.Errorf("idemgrpc: nil error hook: %w", idem.ErrInvalidArgument)
		}
		c.onError = hook
		return nil
	}
}
