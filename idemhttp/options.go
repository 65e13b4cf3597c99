package idemhttp

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idemgo/idem"
)

// Defaults of the middleware's options.
const (
	// DefaultKeyHeader is the request header that carries the key unless
	// WithKeyHeader says otherwise, as the IETF draft names it.
	DefaultKeyHeader = "Idempotency-Key"

	// DefaultMaxBodyBytes is the largest request body the middleware reads
	// unless WithMaxBodyBytes says otherwise: 1 MiB. The whole body is read
	// into memory before the handler runs, to fingerprint it.
	DefaultMaxBodyBytes = 1 << 20

	// DefaultRetryAfter is the delay that 409 and 503 responses ask a client
	// to wait before it retries, unless WithRetryAfter says otherwise. One
	// second matches the Store's default lock timeout: most requests finish
	// within it.
	DefaultRetryAfter = time.Second
)

// An Option configures the middleware made by New. Each option checks its
// own argument, and New reports every bad one at once, so that a service
// learns of all its configuration mistakes at start-up, not one per deploy.
type Option func(*config) error

type config struct {
	header   string
	methods  []string
	required bool
	scope    func(*http.Request) (string, error)
	// scoped and single record which choice of key space was made: New
	// insists on exactly one.
	scoped, single bool
	maxBody        int64
	storable       func(status int) bool
	replay         map[string]bool // canonical header names
	retryAfter     time.Duration
	onError        func(*http.Request, error)
	problemBase    string
	errorWriter    func(http.ResponseWriter, *http.Request, Problem)
	validKey       func(key string) error
	canonicalize   func(contentType string, body []byte) ([]byte, error)
}

func defaultConfig() config {
	c := config{
		header:      DefaultKeyHeader,
		methods:     []string{http.MethodPost, http.MethodPatch},
		maxBody:     DefaultMaxBodyBytes,
		storable:    func(status int) bool { return status < 500 },
		retryAfter:  DefaultRetryAfter,
		problemBase: DefaultProblemTypeBase,
	}
	c.replay = make(map[string]bool)
	for _, name := range DefaultReplayHeaders() {
		c.replay[name] = true
	}
	return c
}

func (c *config) applies(method string) bool { return slices.Contains(c.methods, method) }

// WithKeyHeader sets the request header that carries the key. The default
// is DefaultKeyHeader, "Idempotency-Key", the name clients expect; change it
// only for clients that already send another. The name must be a valid
// header name.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if !isToken(name) {
			return fmt.Errorf("idemhttp: key header %q is not a valid header name: %w", name, idem.ErrInvalidArgument)
		}
		c.header = http.CanonicalHeaderKey(name)
		return nil
	}
}

// WithMethods sets the request methods the middleware protects; requests
// with other methods pass straight through, and Tx returns nil for them. The
// default is POST and PATCH, the methods that are not idempotent by
// definition. Methods are compared as sent, so they are case-sensitive.
func WithMethods(methods ...string) Option {
	return func(c *config) error {
		if len(methods) == 0 {
			return fmt.Errorf("idemhttp: no methods: %w", idem.ErrInvalidArgument)
		}
		for _, m := range methods {
			if !isToken(m) { // a method is a token, as a header name is
				return fmt.Errorf("idemhttp: method %q is not a token: %w", m, idem.ErrInvalidArgument)
			}
		}
		c.methods = slices.Clone(methods)
		return nil
	}
}

// WithKeyRequired makes a request with a protected method but without a key
// fail with 400. Without it, such a request runs without idempotency: the
// handler runs once per request, and Tx returns nil, so the handler must
// open its own transaction or refuse. Endpoints whose effect must not happen
// twice should require a key.
func WithKeyRequired() Option {
	return func(c *config) error {
		c.required = true
		return nil
	}
}

// WithScope sets the function that names the client a request comes from:
// a tenant, an account, an API key's id. The scope is part of the stored key
// (see StoredKey) and of the request's hash, so that clients that choose the
// same key never meet: one cannot replay, block or probe another's request.
// New requires either WithScope or WithSingleClient, so that no API shares
// keys between its clients by omission.
//
// A scope function that fails, or returns an empty scope, fails the request
// with 403 before anything is stored; its error goes to the error hook, never
// to the client. Put authentication in front of the middleware, so that an
// unauthenticated client gets its 401 there. Given more than once, the last
// function counts.
func WithScope(fn func(*http.Request) (string, error)) Option {
	return func(c *config) error {
		c.scoped = true // chosen, even if fn is refused: one error is enough
		if fn == nil {
			return fmt.Errorf("idemhttp: nil scope function: %w", idem.ErrInvalidArgument)
		}
		c.scope = fn
		return nil
	}
}

// WithSingleClient declares that keys need no scope, because the API has a
// single client, or because its keys are random and secret, so that no
// client can guess or learn another's. Keys are then global: the scope is
// empty, and two clients that send the same key share its record, so that
// the second gets the first one's response, a 409 or a 422. It exists so
// that leaving the scope out is a decision written in the code, not an
// oversight; New refuses it together with WithScope.
func WithSingleClient() Option {
	return func(c *config) error {
		c.single = true
		return nil
	}
}

// errScopeChoice is New's answer when the options leave the key space
// undecided, or decide it both ways.
var errScopeChoice = fmt.Errorf("idemhttp: choose how clients' keys are kept apart, with exactly one of two options: "+
	"WithScope(fn), which names the client of each request so that every client has keys of its own, "+
	"as the IETF draft's security considerations recommend (a lookup key made of the client's key and what the server knows of the client); "+
	"or WithSingleClient(), when the API has a single client or its keys are random and secret. "+
	"Without a scope, keys are global, and two clients that send the same key get each other's responses: %w", idem.ErrInvalidArgument)

// WithMaxBodyBytes sets the largest request body of a protected request. A
// larger body fails with 413, before the handler runs: the whole body is read
// into memory to hash it, and a client must not be able to fill the server's
// memory. The default is DefaultMaxBodyBytes, 1 MiB. It must be positive.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("idemhttp: max body bytes must be positive, got %d: %w", n, idem.ErrInvalidArgument)
		}
		c.maxBody = n
		return nil
	}
}

// WithStorePolicy sets which of the handler's statuses are stored and
// replayed.
// A stored status commits the handler's transaction and answers every retry
// with the same response; a status that is not stored rolls the transaction
// back, so that a retry runs the handler again.
//
// The default stores every status below 500: a server error is often
// transient, and a retry should get another chance. A 4xx is stored with
// whatever the handler wrote in Tx before it refused, so refuse before
// writing. A rate limiter's 429 belongs in front of the middleware, or out
// of the policy, since replaying it would refuse every retry. The policy is
// asked of HTTP statuses alone: one outside 100 to 999 is never stored.
func WithStorePolicy(store func(status int) bool) Option {
	return func(c *config) error {
		if store == nil {
			return fmt.Errorf("idemhttp: nil store policy: %w", idem.ErrInvalidArgument)
		}
		c.storable = store
		return nil
	}
}

// DefaultReplayHeaders returns the response headers that are stored and
// replayed unless WithReplayHeaders says otherwise: those without which the
// stored body would mean something else or could not be checked, and those a
// client or a cache relies on to keep and find what the request made. The
// slice is new on each call; extend it to allow more.
//
// The body is stored and replayed byte for byte, as the handler wrote it, so
// every header that says what those bytes are must travel with them:
//
//   - Content-Type, Content-Encoding, Content-Language: what the bytes are,
//     how they are encoded (gzip bytes without Content-Encoding would be
//     read as the Content-Type they are not), and in which language.
//   - Content-Range: which part of a representation a 206 body is.
//   - Content-Digest, Repr-Digest, Digest: checksums of the stored bytes and
//     of the representation; the bytes are the same, so they stay true, and a
//     client that checks them must not find them missing on a retry.
//   - Content-Disposition, Content-Location: how to save the body, and
//     where the same representation can be fetched.
//   - ETag, Last-Modified, Cache-Control, Expires, Vary: what a client or a
//     cache uses to keep the response and revalidate it. Vary stays with a
//     body that depends on a request header, such as Accept-Encoding.
//   - Location, Link: the resource the request made and its relations,
//     which the client acts on.
//
// Left out on purpose: Date and Age, which describe one transmission, not the
// stored response (Date is set afresh on every response; a replayed Age
// would claim the response sat in a cache); Accept-Ranges, which describes
// what the server does with later requests for the resource, not these bytes,
// and which the replay itself does not honour; and Content-Length, which
// net/http computes for every response.
func DefaultReplayHeaders() []string {
	return []string{
		"Cache-Control",
		"Content-Digest",
		"Content-Disposition",
		"Content-Encoding",
		"Content-Language",
		"Content-Location",
		"Content-Range",
		"Content-Type",
		"Digest",
		"Etag",
		"Expires",
		"Last-Modified",
		"Link",
		"Location",
		"Repr-Digest",
		"Vary",
	}
}

// neverReplayed reports whether a stored response must not carry the header
// name (canonical): those that set or carry credentials, which would hand
// one client's session to whoever retries, the hop-by-hop headers, which
// belong to one connection, and those that net/http or the middleware
// compute for every response.
func neverReplayed(name string) bool {
	switch name {
	case "Set-Cookie", "Set-Cookie2", "Authorization", "Proxy-Authorization", "Proxy-Authenticate",
		"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length", "Date", ReplayedHeader:
		return true
	}
	return strings.HasPrefix(name, http.TrailerPrefix)
}

// WithReplayHeaders sets the response headers that are stored with a
// response and replayed; the others reach the first response only. It replaces the
// default list, DefaultReplayHeaders. Credentials (Set-Cookie,
// Authorization), hop-by-hop headers, Content-Length, Date and
// Idempotent-Replayed are refused: they must never be replayed.
func WithReplayHeaders(names ...string) Option {
	return func(c *config) error {
		allow := make(map[string]bool, len(names))
		for _, name := range names {
			if !isToken(name) {
				return fmt.Errorf("idemhttp: replay header %q is not a valid header name: %w", name, idem.ErrInvalidArgument)
			}
			name = http.CanonicalHeaderKey(name)
			if neverReplayed(name) {
				return fmt.Errorf("idemhttp: header %s must never be replayed: %w", name, idem.ErrInvalidArgument)
			}
			allow[name] = true
		}
		c.replay = allow
		return nil
	}
}

// WithRetryAfter sets the delay that 409 (in flight) and 503 (conflict)
// responses ask for in their Retry-After header, rounded up to whole
// seconds. The default is DefaultRetryAfter, one second. It must be
// positive.
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idemhttp: retry after must be positive, got %v: %w", d, idem.ErrInvalidArgument)
		}
		c.retryAfter = d
		return nil
	}
}

// WithErrorHook sets a function that is told about the errors behind the
// middleware's own 5xx and 403 responses, and behind its 400 for a body that
// could not be read: database errors, a failed scope function, a broken
// connection, a nil handler given to Handler. It is told too of a handler
// that ended its transaction itself (idem.ErrTxEnded), whatever the handler
// answered, since the key then waits for an operator. The middleware logs
// nothing itself, since a library cannot know where a service's logs go. The
// hook runs on the request's goroutine before the response is written; keep
// it quick.
func WithErrorHook(fn func(r *http.Request, err error)) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("idemhttp: nil error hook: %w", idem.ErrInvalidArgument)
		}
		c.onError = fn
		return nil
	}
}

// WithProblemTypeBase sets the base of the type URIs of the middleware's
// problems, so that they point at the API's own documentation rather than
// this library's: each type is base followed by the problem's slug, such as
// "key-reused" (Problem.Slug; docs/http.md lists them). The default is
// DefaultProblemTypeBase. base must be an absolute URI, since RFC 9457 asks
// for type URIs that clients can compare and dereference, and must end with
// "/", "#", ":" or "=", since the slug is appended as it is: a base without
// one would glue the slug to its last segment.
func WithProblemTypeBase(base string) Option {
	return func(c *config) error {
		u, err := url.Parse(base)
		switch {
		case err != nil || !u.IsAbs():
			return fmt.Errorf("idemhttp: problem type base %q is not an absolute URI: %w", base, idem.ErrInvalidArgument)
		case !strings.ContainsAny(base[len(base)-1:], "/#:="):
			return fmt.Errorf("idemhttp: problem type base %q must end with /, #, : or =, since the slug is appended to it: %w", base, idem.ErrInvalidArgument)
		}
		c.problemBase = base
		return nil
	}
}

// WithErrorWriter sets the function that writes the middleware's own
// refusals and failures, for an API whose errors have a format of their own.
// It gets the problem (its status, slug, type, title, detail and retry
// delay) and writes the response: its Content-Type, its status, which should
// be p.Status, and its body. Before it runs, the middleware has set
// Cache-Control: no-store, because the same request may succeed later, and
// Retry-After when the problem asks the client to wait, because retrying on
// time is part of the protocol, not of the error format; the writer may
// change them before it writes the status. A writer that writes nothing
// gets p.Status with an empty body, so that a refusal never passes for a
// success. The default writes p as application/problem+json (RFC 9457).
//
// The writer runs on the request's goroutine, for requests the handler
// never saw; it must not panic, and should not call the database.
func WithErrorWriter(fn func(w http.ResponseWriter, r *http.Request, p Problem)) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("idemhttp: nil error writer: %w", idem.ErrInvalidArgument)
		}
		c.errorWriter = fn
		return nil
	}
}

// WithKeyValidator adds the API's own rule for keys, such as "a UUID", to
// the middleware's (1 to MaxClientKeyLength printable ASCII characters). It gets
// the key as the client meant it, unquoted, once the middleware's own rule
// has passed, and before the scope function, the body or the database are
// touched, so a refused key costs nothing. A non-nil error refuses the
// request with 400 invalid-key, and the error's message goes into the
// problem's detail: it is written for the client, so it must say what a key
// should look like and must not carry internal details.
func WithKeyValidator(fn func(key string) error) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("idemhttp: nil key validator: %w", idem.ErrInvalidArgument)
		}
		c.validKey = fn
		return nil
	}
}

// WithBodyCanonicalizer sets the function that turns a request body into
// the form the request hash covers, so that retries which differ in ways the
// API does not care about still count as the same request: JSON with its keys
// sorted and its spacing removed, or without a field that the client sets
// anew on every attempt, such as the time it was sent. It gets the request's
// Content-Type header as sent and the whole body (empty for a request
// without one), and returns the bytes to hash in place of the body; the
// handler still reads the body as it was sent.
//
// It must return the same bytes for bodies that mean the same request, and
// different bytes for any two that do not: two bodies it maps to the same
// bytes are one request, and the second replays the first's response.
// A non-nil error refuses the
// request with 400 body-invalid, before the database is touched, and the
// error's message goes into the problem's detail: it is written for the
// client, and must not carry internal details. Identify hashes with it too.
func WithBodyCanonicalizer(fn func(contentType string, body []byte) ([]byte, error)) Option {
	return func(c *config) error {
		if fn == nil {
			return fmt.Errorf("idemhttp: nil body canonicalizer: %w", idem.ErrInvalidArgument)
		}
		c.canonicalize = fn
		return nil
	}
}

// isToken reports whether s is an RFC 9110 token, as header names and
// methods are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
