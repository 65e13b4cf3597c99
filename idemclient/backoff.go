package idemclient

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// forever is the longest wait a time.Duration holds. A Retry-After that
// asks for longer, in seconds or as a date, is read as forever, which is
// past every WithMaxElapsed, instead of overflowing into a short wait.
const forever = time.Duration(math.MaxInt64)

// wait returns how long Do waits before the attempt that follows attempt,
// which ended elapsed after the first began: the back-off, or the server's
// Retry-After (after, from resp's header) when that is longer. When Do
// must not make that attempt, wait says why, with the error that
// Response.GaveUp documents, and Do returns the answer it has without
// waiting.
func (c *Client) wait(ctx context.Context, attempt int, elapsed, after time.Duration, resp *http.Response) (time.Duration, error) {
	if attempt >= c.maxAttempts {
		return 0, ErrMaxAttempts
	}
	wait := max(after, c.backoff(attempt))
	if left := max(c.maxElapsed-elapsed, 0); wait == forever || wait > left {
		if wait == after {
			return 0, fmt.Errorf("%w: the server asks to wait (Retry-After: %s), and %v of it are left", ErrMaxElapsed, resp.Header.Get("Retry-After"), left)
		}
		return 0, fmt.Errorf("%w: the back-off is %v, and %v of it are left", ErrMaxElapsed, wait, left)
	}
	if deadline, ok := ctx.Deadline(); ok && wait > deadline.Sub(c.now()) {
		return 0, fmt.Errorf("idemclient: a wait of %v would end past the request context's deadline: %w", wait, context.DeadlineExceeded)
	}
	return wait, nil
}

// backoff returns the wait before the retry that follows attempt: a random
// duration up to min(max, base×2^(attempt-1)), full jitter.
func (c *Client) backoff(attempt int) time.Duration {
	bound := c.max
	if shift := attempt - 1; shift < 62 && c.base<<shift > 0 && c.base<<shift < c.max {
		bound = c.base << shift
	}
	return time.Duration(rand.Int64N(int64(bound) + 1))
}

// retryAfter returns the delay that a Retry-After header asks for, in
// seconds or as a date (counted from now), of any size: forever for one
// longer than a time.Duration holds. It is zero for none, a date in the
// past, or one that cannot be read.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		// Only digits: ParseInt fails on them only for a number past int64.
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s > int64(forever/time.Second) {
			return forever
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0) // Sub gives forever for a date past it
	}
	return 0
}
