package idemhttp

import (
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
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
	txOptions      *sql.TxOptions
	onError        func(*http.Request, error)
}

func defaultConfig() config {
	c := config{
		header:     DefaultKeyHeader,
		methods:    []string{http.MethodPost, http.MethodPatch},
		maxBody:    DefaultMaxBodyBytes,
		storable:   func(status int) bool { return status < 500 },
		retryAfter: DefaultRetryAfter,
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
			return fmt.Errorf("idemhttp: key header %q is not a valid header name", name)
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
			return errors.New("idemhttp: no methods")
		}
		for _, m := range methods {
			if !isToken(m) { // a method is a token, as a header name is
				return fmt.Errorf("idemhttp: method %q is not a token", m)
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
			return errors.New("idemhttp: nil scope function")
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
var errScopeChoice = errors.New("idemhttp: choose how clients' keys are kept apart, with exactly one of two options: " +
	"WithScope(fn), which names the client of each request so that every client has keys of its own, " +
	"as the IETF draft's security considerations recommend (a lookup key made of the client's key and what the server knows of the client); " +
	"or WithSingleClient(), when the API has a single client or its keys are random and secret. " +
	"Without a scope, keys are global, and two clients that send the same key get each other's responses")

// WithMaxBodyBytes sets the largest request body of a protected request. A
// larger body fails with 413, before the handler runs: the whole body is read
// into memory to hash it, and a client must not be able to fill the server's
// memory. The default is DefaultMaxBodyBytes, 1 MiB. It must be positive.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("idemhttp: max body bytes must be positive, got %d", n)
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
// of the policy, since replaying it would refuse every retry.
func WithStorePolicy(store func(status int) bool) Option {
	return func(c *config) error {
		if store == nil {
			return errors.New("idemhttp: nil store policy")
		}
		c.storable = store
		return nil
	}
}

// DefaultReplayHeaders returns the response headers that are stored and
// replayed unless WithReplayHeaders says otherwise: those that describe the
// response's content and the resource it made. The slice is new on each
// call; extend it to allow more.
func DefaultReplayHeaders() []string {
	return []string{
		"Cache-Control",
		"Content-Disposition",
		"Content-Language",
		"Content-Location",
		"Content-Type",
		"Etag",
		"Expires",
		"Last-Modified",
		"Link",
		"Location",
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
				return fmt.Errorf("idemhttp: replay header %q is not a valid header name", name)
			}
			name = http.CanonicalHeaderKey(name)
			if neverReplayed(name) {
				return fmt.Errorf("idemhttp: header %s must never be replayed", name)
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
			return fmt.Errorf("idemhttp: retry after must be positive, got %v", d)
		}
		c.retryAfter = d
		return nil
	}
}

// WithTxOptions sets the options of the transaction the middleware begins
// for the handler, such as its isolation level. The default, nil, is the
// database's default. A conflict that the database reports under a stricter
// level makes the middleware run the handler again, up to DoTx's attempts.
func WithTxOptions(opts *sql.TxOptions) Option {
	return func(c *config) error {
		if opts != nil {
			o := *opts
			opts = &o
		}
		c.txOptions = opts
		return nil
	}
}

// WithErrorHook sets a function that is told about the errors behind the
// middleware's own 5xx and 403 responses, and behind its 400 for a body that
// could not be read: database errors, a failed scope function, a broken
// connection, a nil handler given to Handler. The middleware logs nothing
// itself, since a library cannot know where a service's logs go. The hook
// runs on the request's goroutine before the response is written; keep it
// quick.
func WithErrorHook(fn func(r *http.Request, err error)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("idemhttp: nil error hook")
		}
		c.onError = fn
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
