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

	"github.com/idemgo/idem"
)

// txKey is the context key of the handler's transaction.
type txKey struct{}

// Tx returns the transaction in which the handler of a protected request
// must write its effect, so that the effect commits with the record of the
// key or not at all. The middleware begins it and ends it: the handler must
// neither commit nor roll it back, nor write its effect anywhere else.
//
// Tx returns nil when the request is not protected: its method is not one
// of Methods, or it carries no key and the key is not Required. A handler
// that may see such requests opens its own transaction then, or refuses.
func Tx(ctx context.Context) *sql.Tx {
	tx, _ := ctx.Value(txKey{}).(*sql.Tx)
	return tx
}

// New returns a middleware that makes the requests it protects idempotent
// with store, in transactions it begins on db. See the package
// documentation for what it answers.
//
// A bad configuration (a nil store or database, an option that refuses its
// argument) does not panic: the middleware then fails every request with a
// 500 problem and tells the ErrorHook why. Call Check at start-up to find
// out before serving.
func New(store *idem.Store, db *sql.DB, opts ...Option) func(http.Handler) http.Handler {
	m, err := newMiddleware(store, db, opts)
	return func(next http.Handler) http.Handler {
		switch {
		case err != nil:
			return &broken{m.cfg, err}
		case next == nil:
			return &broken{m.cfg, errors.New("idemhttp: nil handler")}
		}
		return &handler{middleware: m, next: next}
	}
}

// Check reports what New would find wrong with its arguments: nil if the
// middleware would serve, or every problem with the configuration.
func Check(store *idem.Store, db *sql.DB, opts ...Option) error {
	_, err := newMiddleware(store, db, opts)
	return err
}

type middleware struct {
	store *idem.Store
	db    *sql.DB
	cfg   config
}

func newMiddleware(store *idem.Store, db *sql.DB, opts []Option) (*middleware, error) {
	m := &middleware{store: store, db: db, cfg: defaultConfig()}
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("idemhttp: nil store"))
	}
	if db == nil {
		errs = append(errs, errors.New("idemhttp: nil database"))
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&m.cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return m, errors.Join(errs...)
}

// broken is the middleware of a bad configuration: it fails closed.
type broken struct {
	cfg config
	err error
}

func (b *broken) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.cfg.report(r, b.err)
	problemInternal.write(w, b.cfg.retryAfter)
}

func (c *config) report(r *http.Request, err error) {
	if c.onError != nil {
		c.onError(r, err)
	}
}

type handler struct {
	*middleware
	next http.Handler
}

// errBodyTooLarge stands for a request body over the limit.
var errBodyTooLarge = errors.New("idemhttp: request body too large")

// unstored is the error of a Func whose handler answered with a status that
// is not stored: DoTx rolls back, and the captured response goes to the
// client as it is.
type unstored struct{ status int }

func (e *unstored) Error() string {
	return fmt.Sprintf("idemhttp: the handler answered %d, which is not stored", e.status)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg := &h.cfg
	if !cfg.applies(r.Method) {
		h.next.ServeHTTP(w, r)
		return
	}
	key, present, kerr := parseKey(r.Header.Values(cfg.header))
	if kerr != nil {
		problemInvalidKey(cfg.header, kerr.reason).write(w, cfg.retryAfter)
		return
	}
	if !present {
		if cfg.required {
			problemKeyRequired(cfg.header).write(w, cfg.retryAfter)
			return
		}
		h.next.ServeHTTP(w, r)
		return
	}
	var (
		scope string
		err   error
	)
	if cfg.scope != nil {
		scope, err = cfg.scope(r)
		if err == nil && scope == "" {
			err = errors.New("idemhttp: the scope function returned an empty scope")
		}
		if err != nil {
			cfg.report(r, fmt.Errorf("idemhttp: scope: %w", err))
			problemScope.write(w, cfg.retryAfter)
			return
		}
	}
	body, err := readBody(r, cfg.maxBody)
	switch {
	case errors.Is(err, errBodyTooLarge):
		problemBodyTooLarge(cfg.maxBody).write(w, cfg.retryAfter)
		return
	case err != nil:
		cfg.report(r, fmt.Errorf("idemhttp: read request body: %w", err))
		problemBodyUnreadable.write(w, cfg.retryAfter)
		return
	}
	hash := idem.Fingerprint([]byte("idemhttp/1"), []byte(scope), []byte(r.Method),
		[]byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), body)

	var c *capture // the attempt that ran last
	res, err := h.store.DoTx(r.Context(), h.db, cfg.txOptions, StoredKey(scope, key), hash,
		func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			// A response is held in memory up to the size the Store stores.
			c = newCapture(h.store.MaxResponseBytes(), cfg.storedSize)
			req := r.WithContext(context.WithValue(ctx, txKey{}, tx))
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			h.next.ServeHTTP(c, req)
			if c.err != nil {
				// Too large, whatever the status: the response was not
				// kept whole, so there is nothing to send but a problem,
				// and a stored status must not commit an effect whose
				// retry could not be answered.
				return idem.Response{}, c.err
			}
			status, header, b := c.response()
			if !cfg.storable(status) {
				return idem.Response{}, &unstored{status}
			}
			return idem.Response{Status: status, Header: cfg.storedHeader(header), Body: b}, nil
		})
	var us *unstored
	switch {
	case errors.As(err, &us), err == nil && res.Outcome == idem.Claimed:
		status, header, body := c.response()
		writeResponse(w, status, header, body)
	case err != nil:
		cfg.report(r, err)
		failure(err).write(w, cfg.retryAfter)
	case res.Outcome == idem.Replay:
		writeReplay(w, res.Response)
	case res.Outcome == idem.Mismatch:
		problemKeyReused.write(w, cfg.retryAfter)
	default: // idem.InFlight
		problemInFlight.write(w, cfg.retryAfter)
	}
}

// failure is the problem that answers an error of DoTx.
func failure(err error) problem {
	switch {
	case errors.Is(err, idem.ErrRetry):
		return problemConflict
	case errors.Is(err, idem.ErrCommitUnknown):
		return problemCommitUnknown
	case errors.Is(err, idem.ErrResponseTooLarge):
		return problemResponseTooLarge
	case errors.Is(err, idem.ErrCorruptRecord):
		return problemRecordDamaged
	}
	return problemInternal
}

// readBody reads the whole request body, up to limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	if r.Body == nil {
		return []byte{}, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, min(limit, math.MaxInt64-1)+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, errBodyTooLarge
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, errBodyTooLarge
	}
	return b, nil
}
