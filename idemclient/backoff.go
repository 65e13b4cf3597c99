package idemclient

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
// seconds or as a date (counted from now); zero for none, or one that
// cannot be read.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 || s > int64(24*time.Hour/time.Second) {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
