package idemclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Defaults of the client's options.
const (
	// DefaultKeyHeader is the request header that carries the key unless
	// WithKeyHeader says otherwise, as the IETF draft names it and idemhttp
	// reads it.
	DefaultKeyHeader = "Idempotency-Key"

	// DefaultMaxAttempts is how many times Do sends a request at most,
	// unless WithMaxAttempts says otherwise: the first attempt and four
	// retries.
	DefaultMaxAttempts = 5

	// DefaultMaxElapsed is how long Do goes on retrying one request at
	// most, from its first attempt, unless WithMaxElapsed says otherwise.
	// It is well within the retention window of idemhttp's default Store
	// (24 hours), past which a retry would run as a new request.
	DefaultMaxElapsed = time.Minute

	// DefaultBaseDelay and DefaultMaxDelay bound the back-off between two
	// attempts, unless WithBackoff says otherwise: the n-th retry waits a
	// random time up to min(DefaultMaxDelay, DefaultBaseDelay×2ⁿ⁻¹), or
	// longer when the server's Retry-After asks for it.
	DefaultBaseDelay = 100 * time.Millisecond
	DefaultMaxDelay  = 10 * time.Second

	// DefaultProblemTypeBase is the base of idemhttp's problem types
	// unless WithProblemTypeBase says otherwise; it is
	// idemhttp.DefaultProblemTypeBase, which this package does not import.
	DefaultProblemTypeBase = "https://github.com/idemgo/idem/blob/main/docs/http.md#"
)

// ErrBodyNotReplayable is Do's error, before any attempt, for a request
// with a body but no GetBody: a retry must send the same body again, and
// such a body can be read once. http.NewRequest sets GetBody for a body of
// *bytes.Buffer, *bytes.Reader or *strings.Reader.
var ErrBodyNotReplayable = errors.New("idemclient: the request body cannot be sent again: give it a GetBody, as http.NewRequest does for a *bytes.Buffer, *bytes.Reader or *strings.Reader")

// ErrMaxAttempts is in Response.GaveUp when Do returned an answer that
// asked for another attempt, after the attempts of WithMaxAttempts.
var ErrMaxAttempts = errors.New("idemclient: the answer asks for another attempt, and WithMaxAttempts allows no more")

// ErrMaxElapsed is in Response.GaveUp when Do returned an answer that asked
// for another attempt whose wait, the back-off or the server's
// Retry-After, would end past WithMaxElapsed from the first attempt. Do
// returns such an answer at once, without the wait; the error says how
// long the server asked to wait.
var ErrMaxElapsed = errors.New("idemclient: the next attempt would come past WithMaxElapsed")

// Client sends requests with an idempotency key, and sends them again,
// with the same key and the same body, when the answer says that this is
// safe and may succeed. Make one with New; it is safe for concurrent use.
type Client struct {
	http        *http.Client
	header      string
	maxAttempts int
	maxElapsed  time.Duration
	base, max   time.Duration
	problemBase string
	// now and sleep are Do's clock and its wait between attempts:
	// time.Now and sleep, which tests replace.
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

// New returns a Client with the options, or an error that names every
// option that refused its argument.
func New(opts ...Option) (*Client, error) {
	c := &Client{
		http:        http.DefaultClient,
		header:      DefaultKeyHeader,
		maxAttempts: DefaultMaxAttempts,
		maxElapsed:  DefaultMaxElapsed,
		base:        DefaultBaseDelay,
		max:         DefaultMaxDelay,
		problemBase: DefaultProblemTypeBase,
		now:         time.Now,
		sleep:       sleep,
	}
	var errs []error
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// NewKey returns a new idempotency key: a random text of at least 128 bits,
// which no one can guess. Make one per intention, such as one order a user
// placed, and keep it with the intention so that even a retry after a
// restart sends it again.
func NewKey() string { return rand.Text() }

// Response is the final answer to a request that Do sent.
type Response struct {
	*http.Response
	// Key is the idempotency key that every attempt carried.
	Key string
	// Attempts is how many times the request was sent.
	Attempts int
	// Replayed is true when the server answered from what it stored for
	// an earlier attempt (Idempotent-Replayed: true): the work was done
	// once, before.
	Replayed bool
	// GaveUp is nil when the answer is final. Otherwise the answer asked
	// for another attempt, which Do did not make, and GaveUp says why:
	// it matches ErrMaxAttempts, ErrMaxElapsed (also when the server's
	// Retry-After asked for a wait past it), or context.DeadlineExceeded
	// for a wait that would end past the request context's deadline. The
	// intention is still open: a later retry with Key may succeed.
	GaveUp error
}

// Error is Do's error: the request was refused before its first attempt,
// its last attempt got no answer, or the request's context ended.
type Error struct {
	// Key is the idempotency key of the request; a later retry of the
	// same intention must send it again.
	Key string
	// Attempts is how many times the request was sent.
	Attempts int
	// Err is the error of the last attempt, or the reason none was made.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("idemclient: %d attempts with key %s: %v", e.Attempts, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Do sends req with an idempotency key until it gets a final answer, and
// returns it. The key is req's own, when its header carries one, and a new
// one (NewKey) otherwise; every attempt sends it, with the same method,
// URL, headers and body, so that the server can tell that they are one
// request. A body must be replayable (ErrBodyNotReplayable).
//
// An answer is retried when idemhttp says the request may succeed with the
// same key (a problem of type in-flight, conflict, unfinished or
// outcome-unknown under the problem type base, after its Retry-After), and
// otherwise by its status: 429 and 503, after their Retry-After, 502 and
// 504. So are an attempt that got no answer: a connection that failed or
// was reset, a response that never came, an attempt over the http.Client's
// Timeout. Every other answer is final: idemhttp's other problems, such as
// key-reused, which a retry would meet again, and the application's own
// statuses, a 409 or a 500 among them.
//
// Retries wait a random time up to a bound that doubles with each retry
// (WithBackoff), or the Retry-After the server asked for, in seconds or as
// a date, of any size, when that is longer. Do stops after WithMaxAttempts
// attempts, and before a wait that would end past WithMaxElapsed or the
// context's deadline, without taking that wait, and returns the last answer
// then, with Response.GaveUp saying which limit it met; it returns an
// *Error when the last attempt got none. The bodies of all answers but the
// last are read and closed; the caller closes the last one's. req is not
// changed: each attempt sends a copy, with the key in its header.
func (c *Client) Do(req *http.Request) (*Response, error) {
	if c == nil || c.http == nil {
		return nil, errors.New("idemclient: the Client was not made by New")
	}
	if req == nil {
		return nil, errors.New("idemclient: nil request")
	}
	key := req.Header.Get(c.header)
	if key == "" {
		key = NewKey()
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return nil, &Error{Key: key, Err: ErrBodyNotReplayable}
	}
	ctx := req.Context()
	start := c.now()
	for attempt := 1; ; attempt++ {
		resp, err := c.send(req, key, attempt)
		retry, after := c.verdict(ctx, resp, err)
		var wait time.Duration
		var gaveUp error
		if retry {
			wait, gaveUp = c.wait(ctx, attempt, c.now().Sub(start), after, resp)
		}
		if !retry || gaveUp != nil {
			if err != nil {
				return nil, &Error{Key: key, Attempts: attempt, Err: err}
			}
			return &Response{Response: resp, Key: key, Attempts: attempt, Replayed: resp.Header.Get("Idempotent-Replayed") == "true", GaveUp: gaveUp}, nil
		}
		discard(resp)
		if err := c.sleep(ctx, wait); err != nil {
			return nil, &Error{Key: key, Attempts: attempt, Err: err}
		}
	}
}

// send makes one attempt of req with key: a copy of req, with the key in
// its header and, after the first attempt, a fresh copy of its body. req
// itself is not changed, and its Header may be nil, as http.Client allows.
func (c *Client) send(req *http.Request, key string, attempt int) (*http.Response, error) {
	r := req.Clone(req.Context())
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Set(c.header, key)
	if attempt > 1 && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("idemclient: the request body for attempt %d: %w", attempt, err)
		}
		r.Body = body
	}
	return c.http.Do(r)
}

// maxProblemBytes is the most of a problem's body that verdict reads to
// learn its type: idemhttp's problems are well under 1 KiB.
const maxProblemBytes = 64 << 10

// verdict tells whether the answer resp, or err for an attempt that got
// none, is worth another attempt, and how long the server asked the client
// to wait first. It reads the body of a problem, and puts it back for the
// caller.
func (c *Client) verdict(ctx context.Context, resp *http.Response, err error) (retry bool, after time.Duration) {
	if err != nil {
		return ctx.Err() == nil, 0 // no answer, unless the caller gave up
	}
	after = retryAfter(resp.Header.Get("Retry-After"), c.now())
	if slug, ok := c.problemSlug(resp); ok {
		switch slug {
		case "in-flight", "conflict", "unfinished", "outcome-unknown":
			return true, after
		}
		return false, 0
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true, after
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return true, 0
	}
	return false, 0
}

// problemSlug returns the slug of resp's problem type when resp is a
// problem of idemhttp's: application/problem+json whose type is the
// problem type base and a slug.
func (c *Client) problemSlug(resp *http.Response) (string, bool) {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		return "", false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	resp.Body = &replayedBody{Reader: io.MultiReader(bytes.NewReader(b), resp.Body), Closer: resp.Body}
	if err != nil {
		return "", false
	}
	var p struct{ Type string }
	if json.Unmarshal(b, &p) != nil {
		return "", false
	}
	slug, ok := strings.CutPrefix(p.Type, c.problemBase)
	return slug, ok && slug != ""
}

// replayedBody is a response body that was read in part and put back.
type replayedBody struct {
	io.Reader
	io.Closer
}

// discard reads what is left of resp's body, up to a bound, and closes it,
// so that its connection can serve the next attempt.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProblemBytes))
	_ = resp.Body.Close()
}
