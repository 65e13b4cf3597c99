package idemhttp

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/answer"
	"github.com/idemgo/idem/internal/capture"
)

// WithTx returns a copy of ctx that carries tx, for Tx to return: it is
// idem.WithTx for a *sql.Tx. The Runner of New (idem.SQLRunner) hands each
// attempt's transaction to the handler this way. It is exported so that a
// handler can be given a transaction without the middleware: a unit test
// of the handler alone, with a transaction of go-sqlmock, calls the
// handler with a request whose context comes from WithTx. The handler
// cannot tell the difference.
func WithTx(ctx context.Context, tx *sql.Tx) context.Context {
	return idem.WithTx(ctx, tx)
}

// Tx returns the transaction in which the handler of a protected request
// must write its effect, so that the effect commits with the record of the
// key or not at all. The middleware begins it and ends it: the handler must
// neither commit nor roll it back, nor write its effect anywhere else. It
// is idem.TxFrom for a *sql.Tx, and so the same as idemgrpc.Tx: a handler
// that serves both adapters finds its transaction either way. On another
// driver, the handler finds its transaction with that driver's function
// (idempgx.Tx, for a pgx.Tx).
//
// Tx returns nil when the request is not protected: its method is not one
// of WithMethods, or it carries no key and the key is not required
// (WithKeyRequired). A handler that may see such requests opens its own
// transaction then, or refuses. A test gives a handler its transaction with
// WithTx.
func Tx(ctx context.Context) *sql.Tx {
	return idem.TxFrom[*sql.Tx](ctx)
}

// Middleware makes the requests it protects idempotent with an idem.Store,
// in transactions it begins on a database. Make one with New, once, at
// start-up, or with NewWithRunner for a database of another driver;
// Handler then wraps each handler to protect, and Steps serves each
// multi-step endpoint. A Middleware is safe for concurrent use.
type Middleware struct {
	store *idem.Store
	run   idem.Runner
	cfg   config
}

// NewWithRunner is New for a database that run reaches, through any
// driver: the protected requests run through run's DoTx and Run, which
// are the Store's on that database (idem.SQLRunner for a *sql.DB, which is
// New; idempgx.Runner for a pgx pool, which idempgx.NewMiddleware
// passes), and its handlers find their transaction where run puts it
// (idempgx.Tx, for a pgx.Tx). run must run on store. The options are
// New's. It takes no transaction options: run begins the transactions, so
// their options are given where run is made. The same Runner serves
// idemgrpc's interceptor too.
func NewWithRunner(store *idem.Store, run idem.Runner, opts ...Option) (*Middleware, error) {
	m, err := newMiddleware(store, run == nil, "nil runner", opts)
	if err != nil {
		return nil, err
	}
	m.run = run
	return m, nil
}

// New returns a Middleware that makes the requests it protects idempotent
// with store, in transactions it begins on db. See the package
// documentation for what it answers.
//
// txOpts are the options of every transaction the middleware begins, one
// per attempt of a protected request or phase of a multi-step one, such as
// its isolation level; nil leaves them to the database's defaults. New
// keeps a copy, so a change to *txOpts afterwards changes nothing. A
// conflict that the database reports under a stricter level makes the
// middleware run the handler or the phase again, up to DoTx's attempts.
// They are an argument, as they are of idem.Store.DoTx, Run and Resume, so
// that every constructor or call that begins transactions on a *sql.DB is
// given their options in the same place. New is NewWithRunner with
// idem.SQLRunner(store, db, txOpts).
//
// It returns an error for a bad configuration, listing every problem: a nil
// store or database, a Store not made by idem.New, an option that refuses
// its argument, and options that choose neither or both of WithScope and
// WithSingleClient. Every one of them wraps idem.ErrInvalidArgument, as the
// Store's own refusals do, so that errors.Is tells a refused configuration
// from a failure. The choice of key space is required because the safe
// default, a scope, needs to know who the client is, which only the
// service can tell; and the unsafe one, global keys, must be a visible
// decision rather than what happens when an option is forgotten. Failing
// here, at start-up, is the point: a configuration mistake must stop the
// deploy, not fail every request.
func New(store *idem.Store, db *sql.DB, txOpts *sql.TxOptions, opts ...Option) (*Middleware, error) {
	m, err := newMiddleware(store, db == nil, "nil database", opts)
	if err != nil {
		return nil, err
	}
	m.run = idem.SQLRunner(store, db, txOpts)
	return m, nil
}

// newMiddleware checks what New and NewWithRunner share: noDB is true when
// the database or the runner is missing, which noDBError says.
func newMiddleware(store *idem.Store, noDB bool, noDBError string, opts []Option) (*Middleware, error) {
	m := &Middleware{store: store, cfg: defaultConfig()}
	var errs []error
	switch {
	case store == nil:
		errs = append(errs, fmt.Errorf("idemhttp: nil store: %w", idem.ErrInvalidArgument))
	case store.Dialect() == nil:
		errs = append(errs, fmt.Errorf("idemhttp: the store was not made by idem.New: %w", idem.ErrInvalidArgument))
	}
	if noDB {
		errs = append(errs, fmt.Errorf("idemhttp: %s: %w", noDBError, idem.ErrInvalidArgument))
	}
	for _, opt := range opts {
		if opt == nil {
			continue // lets a caller leave an optional option out in place
		}
		if err := opt(&m.cfg); err != nil {
			errs = append(errs, err)
		}
	}
	if m.cfg.scoped == m.cfg.single {
		errs = append(errs, errScopeChoice)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// usable reports why m cannot serve: it is nil, as New returns it with an
// error, or a zero Middleware, which has no store.
func (m *Middleware) usable() error {
	switch {
	case m == nil:
		return fmt.Errorf("idemhttp: nil Middleware (New returns nil with its error): %w", idem.ErrInvalidArgument)
	case m.store == nil:
		return fmt.Errorf("idemhttp: the Middleware was not made by New: %w", idem.ErrInvalidArgument)
	}
	return nil
}

// Handler returns next wrapped in the middleware: requests with a protected
// method and a key run next at most once per key, in a transaction that
// commits with the record of the key; other requests go to next as they
// are. It has the shape of net/http middleware, so routers take it as a
// method value: r.Use(m.Handler).
//
// Handler cannot return an error, and must not panic, so a nil next, or a
// Middleware that New did not return, fails closed instead: every request
// gets a 500 internal-error problem, and the error hook, where the
// Middleware has one, is told why. A route that refuses every request is found by the first test
// or health check; one that ran unprotected might not be.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if err := m.usable(); err != nil {
		return &failing{err: err}
	}
	if next == nil {
		return &failing{cfg: &m.cfg, err: fmt.Errorf("idemhttp: Handler was given a nil handler: %w", idem.ErrInvalidArgument)}
	}
	return &handler{m: m, next: next}
}

// Identify returns the stored key and the request hash of r exactly as the
// middleware computes them, under its options: the key is StoredKey of the
// scope and the client's key, and the hash is described in the package
// documentation. The middleware itself identifies every request with the
// same code, so the two cannot disagree. It lets a test expect the claim of
// a request without repeating the hash's formula (see idemtest's
// Mock.ExpectRequest), and an operator find the record of a request. A
// handler or a step need not call it to know the request it serves:
// idem.IdentityFrom reads the request's stored key and scope from the
// context that the middleware hands it, without reading the body again.
//
// It reads r's body, up to the limit of WithMaxBodyBytes, and puts it back,
// so that r can still be served. It calls the scope function with r. It
// returns an error, and no key, for a request the middleware would not
// claim a key for: a method it does not protect, a missing or malformed
// key (WithKeyValidator included), a scope function that fails, or a body
// that is too large, unreadable or refused by the canonicalizer of
// WithBodyCanonicalizer, whose bytes it hashes as the middleware does.
func (m *Middleware) Identify(r *http.Request) (key string, hash []byte, err error) {
	if err := m.usable(); err != nil {
		return "", nil, err
	}
	if r == nil {
		return "", nil, fmt.Errorf("idemhttp: nil request: %w", idem.ErrInvalidArgument)
	}
	id, err := m.identify(r, true)
	if err != nil {
		return "", nil, err
	}
	return id.key, id.hash, nil
}

// identity is what the middleware knows of a protected request before it
// claims the key.
type identity struct {
	key   string // the stored key, with the scope
	scope string // "" with WithSingleClient
	hash  []byte
	body  []byte
}

// scoped returns ctx with the request's scope, which the Store hands on
// to the request's idem.Identity and to its Events.
func (id identity) scoped(ctx context.Context) context.Context {
	if id.scope == "" {
		return ctx
	}
	return idem.WithScope(ctx, id.scope)
}

// Why identify found no key to claim. The handler answers each in its own
// way; Identify returns them as they are.
type (
	// unprotected is a request whose method is not protected: it passes
	// through.
	unprotected struct{ method string }
	// noKey is a request without the key header: a 400 when the key is
	// required, passed through otherwise.
	noKey struct{ header string }
	// scopeError is a scope function's failure: a 403.
	scopeError struct{ err error }
	// bodyError is a body that could not be read: a 400.
	bodyError struct{ err error }
	// canonError is a body the canonicalizer refused: a 400.
	canonError struct{ err error }
)

func (e *unprotected) Error() string {
	return fmt.Sprintf("idemhttp: method %s is not protected (see WithMethods)", e.method)
}

func (e *noKey) Error() string {
	return "idemhttp: the request has no " + e.header + " header"
}

func (e *scopeError) Error() string { return "idemhttp: scope: " + e.err.Error() }
func (e *scopeError) Unwrap() error { return e.err }
func (e *bodyError) Error() string  { return "idemhttp: read request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error  { return e.err }
func (e *canonError) Error() string { return "idemhttp: body canonicalizer: " + e.err.Error() }
func (e *canonError) Unwrap() error { return e.err }

// errBodyTooLarge stands for a request body over the limit.
var errBodyTooLarge = errors.New("idemhttp: request body too large")

// identify names the request: its key, its scope, its body and their hash,
// in the order in which the middleware refuses them, so that a request with
// a bad key costs neither a call of the scope function nor a read of the
// body; a key the API's validator refuses costs no more than a malformed
// one. The canonicalizer's bytes go into the hash, the body as sent to the
// handler. With putBack, it leaves r's body readable from the start again, for
// Identify's caller; the middleware does not ask for it, since net/http
// asks handlers not to change the request they are given beyond reading
// its body.
func (m *Middleware) identify(r *http.Request, putBack bool) (identity, error) {
	cfg := &m.cfg
	if !cfg.applies(r.Method) {
		return identity{}, &unprotected{r.Method}
	}
	key, present, kerr := parseKey(r.Header.Values(cfg.header))
	if kerr != nil {
		return identity{}, kerr
	}
	if !present {
		return identity{}, &noKey{cfg.header}
	}
	if cfg.validKey != nil {
		if err := cfg.validKey(key); err != nil {
			return identity{}, &keyError{reason: err.Error(), refused: err}
		}
	}
	var scope string
	if cfg.scope != nil {
		var err error
		scope, err = cfg.scope(r)
		if err == nil && scope == "" {
			err = errors.New("the scope function returned an empty scope")
		}
		if err != nil {
			return identity{}, &scopeError{err}
		}
	}
	body, err := readBody(r, cfg.maxBody, putBack)
	if err != nil {
		return identity{}, err
	}
	hashed := body
	if cfg.canonicalize != nil {
		hashed, err = cfg.canonicalize(r.Header.Get("Content-Type"), body)
		if err != nil {
			return identity{}, &canonError{err}
		}
	}
	return identity{key: StoredKey(scope, key), scope: scope, hash: requestHash(scope, r, hashed), body: body}, nil
}

// hashVersion is the first part of every request hash: it names the
// formula. A later formula (another part, a part normalised) gets another
// version, so that its hashes cannot equal this one's for different
// requests, and a retry that spans the upgrade gets a 422 at worst, never
// another request's response. docs/http.md documents the formula.
const hashVersion = "idemhttp/1"

// requestHash is the fingerprint of a request: idem.Fingerprint of the
// version, the scope, the method, the escaped path, the raw query and the
// body, each framed by its length. The scope is in it so that the hash is
// the client's too, though the stored key already separates clients.
func requestHash(scope string, r *http.Request, body []byte) []byte {
	return idem.Fingerprint([]byte(hashVersion), []byte(scope), []byte(r.Method),
		[]byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), body)
}

// failing is the handler of a Middleware that cannot serve: it fails
// closed, and says why.
// Its configuration is the Middleware's, when there is one, so that the API's
// error writer and problem types apply; the default otherwise.
type failing struct {
	cfg *config
	err error
}

func (f *failing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg := f.cfg
	if cfg == nil {
		d := defaultConfig()
		cfg = &d
	}
	cfg.report(r, f.err)
	cfg.writeProblem(w, r, problemInternal)
}

func (c *config) report(r *http.Request, err error) {
	if c.onError != nil {
		c.onError(r, err)
	}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

// unstored is the error of a Func whose handler answered with a status that
// is not stored: DoTx rolls back, and the captured response goes to the
// client as it is.
type unstored struct{ status int }

func (e *unstored) Error() string {
	return fmt.Sprintf("idemhttp: the handler answered %d, which is not stored", e.status)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m, cfg := h.m, &h.m.cfg
	id, err := m.identify(r, false)
	if err != nil {
		m.refuse(w, r, err, h.next)
		return
	}

	var c *capture.Writer // the attempt that ran last
	// serve runs one attempt of the handler, with a context that carries
	// the attempt's transaction.
	serve := func(ctx context.Context) (idem.Response, error) {
		// A response is held in memory up to the size the Store stores.
		c = capture.New(m.store.MaxResponseBytes(), cfg.storedSize)
		req := r.WithContext(ctx)
		req.Body = io.NopCloser(bytes.NewReader(id.body))
		req.ContentLength = int64(len(id.body))
		h.next.ServeHTTP(c, req)
		if c.Err() != nil {
			// Too large, whatever the status: the response was not
			// kept whole, so there is nothing to send but a problem,
			// and a stored status must not commit an effect whose
			// retry could not be answered.
			return idem.Response{}, c.Err()
		}
		resp := c.Response()
		// A status that HTTP cannot send is never stored, whatever the
		// policy: writeResponse answers it, and a retry runs again.
		if !validStatus(resp.Status) || !cfg.storable(resp.Status) {
			return idem.Response{}, &unstored{resp.Status}
		}
		return idem.Response{Status: resp.Status, Header: cfg.storedHeader(resp.Header), Body: resp.Body}, nil
	}
	res, err := m.run.DoTx(id.scoped(r.Context()), id.key, id.hash, serve)
	var us *unstored
	switch {
	case errors.As(err, &us):
		if error(us) != err {
			// DoTx had more to say, such as a transaction that the
			// handler ended, which leaves the key to an operator: the
			// client gets the handler's response all the same, and the
			// hook is told, as idemgrpc tells it of a handler's error.
			cfg.report(r, err)
		}
		cfg.writeResponse(w, r, c.Response(), originUnstored)
	case err == nil && res.Outcome == idem.Claimed:
		cfg.writeResponse(w, r, c.Response(), originStored)
	case err != nil:
		cfg.report(r, err)
		cfg.writeProblem(w, r, failure(err))
	default:
		cfg.writeUnclaimed(w, r, res)
	}
}

// writeUnclaimed answers the outcomes of a request that this call did not
// run, as the table says (answer.Outcome): a replay of its stored
// response, a mismatch, or a request that another call holds, which is
// asked to wait at least for the lease left to a multi-step request's
// runner.
func (c *config) writeUnclaimed(w http.ResponseWriter, r *http.Request, res idem.Result) {
	a, ok := answer.Outcome(res.Outcome)
	if !ok { // a Replay; Claimed is answered before
		c.writeResponse(w, r, res.Response, originReplay)
		return
	}
	c.writeProblemAfter(w, r, problemOf(a), res.LeaseLeft)
}

// refuse answers a request that identify found no key to claim for. It
// passes a request that is not protected to next, and one without a key
// too when the key is not required; with no next, as for Steps, which
// cannot serve a request without a key, they get 405 and 400. The others
// get their problem.
func (m *Middleware) refuse(w http.ResponseWriter, r *http.Request, err error, next http.Handler) {
	cfg := &m.cfg
	var (
		un *unprotected
		nk *noKey
		ke *keyError
		se *scopeError
		ce *canonError
	)
	switch {
	case errors.As(err, &un) && next != nil:
		next.ServeHTTP(w, r)
	case errors.As(err, &un):
		w.Header().Set("Allow", strings.Join(cfg.methods, ", "))
		cfg.writeProblem(w, r, problemMethod)
	case errors.As(err, &nk):
		if !cfg.required && next != nil {
			next.ServeHTTP(w, r) // unprotected, as the option allows
			return
		}
		cfg.writeProblem(w, r, problemKeyRequired(cfg.header))
	case errors.As(err, &ke) && ke.refused != nil:
		cfg.writeProblem(w, r, problemKeyRefused(cfg.header, ke.reason))
	case errors.As(err, &ke):
		cfg.writeProblem(w, r, problemInvalidKey(cfg.header, ke.reason))
	case errors.As(err, &se):
		cfg.report(r, err)
		cfg.writeProblem(w, r, problemScope)
	case errors.Is(err, errBodyTooLarge):
		cfg.writeProblem(w, r, problemBodyTooLarge(cfg.maxBody))
	case errors.As(err, &ce):
		// The client's mistake, as the option documents: the hook is for
		// the server's.
		cfg.writeProblem(w, r, problemBodyInvalid(ce.err.Error()))
	default: // a bodyError
		cfg.report(r, err)
		cfg.writeProblem(w, r, problemBodyUnreadable)
	}
}

// failure is the problem that answers an error of DoTx, as the table says
// (answer.DoTx).
func failure(err error) kind { return problemOf(answer.DoTx.Of(err)) }

// readBody reads the whole request body, up to limit bytes. With putBack,
// it puts what it read back in front of what it did not, so that r's body
// reads from the start again, whatever happened.
func readBody(r *http.Request, limit int64, putBack bool) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge // nothing read: the body is untouched
	}
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, min(limit, math.MaxInt64-1)+1))
	if putBack {
		r.Body = &reread{Reader: io.MultiReader(bytes.NewReader(b), r.Body), Closer: r.Body}
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, errBodyTooLarge
	case err != nil:
		return nil, &bodyError{err}
	case int64(len(b)) > limit:
		return nil, errBodyTooLarge
	}
	return b, nil
}

// reread is a request body that was read and put back: it reads the bytes
// read, then the rest, and closes the original body.
type reread struct {
	io.Reader
	io.Closer
}
