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
	// KeyHeader says otherwise, as the IETF draft names it.
	DefaultKeyHeader = "Idempotency-Key"

	// DefaultMaxBodyBytes is the largest request body the middleware reads
	// unless MaxBodyBytes says otherwise: 1 MiB. The whole body is read
	// into memory before the handler runs, to fingerprint it.
	DefaultMaxBodyBytes = 1 << 20

	// DefaultRetryAfter is the delay that 409 and 503 responses ask a client
	// to wait before it retries, unless RetryAfter says otherwise. One
	// second matches the Store's default lock timeout: most requests finish
	// within it.
	DefaultRetryAfter = time.Second
)

// An Option configures the middleware made by New. Each option checks its
// own argument; Check reports every bad one.
type Option func(*config) error

type config struct {
	header     string
	methods    []string
	required   bool
	scope      func(*http.Request) (string, error)
	maxBody    int64
	storable   func(status int) bool
	replay     map[string]bool // canonical header names
	retryAfter time.Duration
	txOptions  *sql.TxOptions
	onError    func(*http.Request, error)
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

// KeyHeader sets the request header that carries the key. The default is
// DefaultKeyHeader, "Idempotency-Key". The name must be a valid header name.
func KeyHeader(name string) Option {
	return func(c *config) error {
		if !isToken(name) {
			return fmt.Errorf("idemhttp: key header %q is not a valid header name", name)
		}
		c.header = http.CanonicalHeaderKey(name)
		return nil
	}
}

// Methods sets the request methods the middleware protects; requests with
// other methods pass straight through, and Tx returns nil for them. The
// default is POST and PATCH, the methods that are not idempotent by
// definition. Methods are compared as sent, so they are case-sensitive.
func Methods(methods ...string) Option {
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

// Required makes a protected request without a key fail with 400. Without
// it, such a request runs without idempotency: the handler runs once per
// request, and Tx returns nil, so the handler must open its own transaction
// or refuse. Endpoints whose effect must not happen twice should require a
// key.
func Required() Option {
	return func(c *config) error {
		c.required = true
		return nil
	}
}

// Scope sets the function that names the client a request comes from: a
// tenant, an account, an API key's id. The scope is part of the stored key
// and of the request's fingerprint, so clients that choose the same key
// never meet: one cannot replay, block or probe another's request.
//
// Without a scope, keys are global: two clients that send the same key share
// it, and the second gets the first one's response or a 422. Only leave it
// out when the API has a single client or keys are random and secret.
//
// A scope function that fails, or returns an empty scope, fails the request
// with 403 before anything is stored; its error goes to the ErrorHook, never
// to the client. Put authentication in front of the middleware, so that an
// unauthenticated client gets its 401 there.
func Scope(fn func(*http.Request) (string, error)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("idemhttp: nil scope function")
		}
		c.scope = fn
		return nil
	}
}

// MaxBodyBytes sets the largest request body of a protected request. A
// larger body fails with 413, before the handler runs. The default is
// DefaultMaxBodyBytes, 1 MiB. It must be positive.
func MaxBodyBytes(n int64) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("idemhttp: max body bytes must be positive, got %d", n)
		}
		c.maxBody = n
		return nil
	}
}

// StorePolicy sets which of the handler's statuses are stored and replayed.
// A stored status commits the handler's transaction and answers every retry
// with the same response; a status that is not stored rolls the transaction
// back, so that a retry runs the handler again.
//
// The default stores every status below 500: a server error is often
// transient, and a retry should get another chance. A 4xx is stored with
// whatever the handler wrote in Tx before it refused, so refuse before
// writing. A rate limiter's 429 belongs in front of the middleware, or out
// of the policy, since replaying it would refuse every retry.
func StorePolicy(store func(status int) bool) Option {
	return func(c *config) error {
		if store == nil {
			return errors.New("idemhttp: nil store policy")
		}
		c.storable = store
		return nil
	}
}

// DefaultReplayHeaders returns the response headers that are stored and
// replayed unless ReplayHeaders says otherwise: those that describe the
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

// ReplayHeaders sets the response headers that are stored with a response
// and replayed; the others reach the first response only. It replaces the
// default list, DefaultReplayHeaders. Credentials (Set-Cookie,
// Authorization), hop-by-hop headers, Content-Length, Date and
// Idempotent-Replayed are refused: they must never be replayed.
func ReplayHeaders(names ...string) Option {
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

// RetryAfter sets the delay that 409 (in flight) and 503 (conflict)
// responses ask for in their Retry-After header, rounded up to whole
// seconds. The default is DefaultRetryAfter, one second. It must be
// positive.
func RetryAfter(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("idemhttp: retry after must be positive, got %v", d)
		}
		c.retryAfter = d
		return nil
	}
}

// TxOptions sets the options of the transaction the middleware begins for
// the handler, such as its isolation level. The default, nil, is the
// database's default. A conflict that the database reports under a stricter
// level makes the middleware run the handler again, up to DoTx's attempts.
func TxOptions(opts *sql.TxOptions) Option {
	return func(c *config) error {
		if opts != nil {
			o := *opts
			opts = &o
		}
		c.txOptions = opts
		return nil
	}
}

// ErrorHook sets a function that is told about the errors behind the
// middleware's own 5xx and 403 responses: database errors, a failed scope
// function, a request body that could not be read, a bad configuration. The
// middleware logs nothing itself. The hook runs on the request's goroutine
// before the response is written; keep it quick.
func ErrorHook(fn func(r *http.Request, err error)) Option {
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
