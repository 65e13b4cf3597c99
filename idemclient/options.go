package idemclient

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// An Option configures the Client made by New.
type Option func(*Client) error

// WithHTTPClient sets the http.Client that sends each attempt; the
// default is http.DefaultClient. Its Timeout bounds each attempt: an
// attempt over it is retried, as one whose answer was lost. The request's
// context bounds them all.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("idemclient: nil http.Client")
		}
		c.http = hc
		return nil
	}
}

// WithKeyHeader sets the request header that carries the key; the default
// is DefaultKeyHeader. It must be the header the server reads.
func WithKeyHeader(name string) Option {
	return func(c *Client) error {
		if name == "" || strings.ContainsAny(name, " \t\r\n:") {
			return fmt.Errorf("idemclient: %q is not a header name", name)
		}
		c.header = http.CanonicalHeaderKey(name)
		return nil
	}
}

// WithMaxAttempts sets how many times Do sends a request at most, the first
// attempt included; the default is DefaultMaxAttempts. One sends it once.
func WithMaxAttempts(n int) Option {
	return func(c *Client) error {
		if n < 1 {
			return fmt.Errorf("idemclient: %d attempts, want at least 1", n)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithMaxElapsed sets how long Do goes on retrying one request, from its
// first attempt; the default is DefaultMaxElapsed. Do makes no attempt
// whose wait, the back-off or the server's Retry-After, would end past it:
// it returns the answer it has at once, with Response.GaveUp matching
// ErrMaxElapsed. Keep it well within the server's retention
// window: a retry after the window runs as a new request.
func WithMaxElapsed(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("idemclient: max elapsed %v, want a positive duration", d)
		}
		c.maxElapsed = d
		return nil
	}
}

// WithBackoff sets the bounds of the wait between attempts: the n-th retry
// waits a random time, up to min(max, base×2ⁿ⁻¹), drawn afresh each time
// (full jitter), so that clients that failed together do not retry
// together; a longer Retry-After wins. The defaults are DefaultBaseDelay
// and DefaultMaxDelay.
func WithBackoff(base, max time.Duration) Option {
	return func(c *Client) error {
		if base <= 0 || max < base {
			return fmt.Errorf("idemclient: back-off from %v up to %v, want 0 < base <= max", base, max)
		}
		c.base, c.max = base, max
		return nil
	}
}

// WithProblemTypeBase sets the base of the server's problem types, as the
// server's idemhttp.WithProblemTypeBase does; the default is
// DefaultProblemTypeBase. A problem whose type is not under it is the
// application's own, and is retried by its status alone.
func WithProblemTypeBase(base string) Option {
	return func(c *Client) error {
		if base == "" {
			return errors.New("idemclient: empty problem type base")
		}
		c.problemBase = base
		return nil
	}
}
