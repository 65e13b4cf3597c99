package idemclient

import (
	"testing"
	"time"
)

// TestBackoffIsCappedFullJitter draws many waits for each retry: each is
// between zero and min(max, base×2ⁿ⁻¹), and they spread over that range.
func TestBackoffIsCappedFullJitter(t *testing.T) {
	c := &Client{base: 100 * time.Millisecond, max: time.Second}
	for attempt, bound := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 80: time.Second} {
		var low, high bool
		for range 2000 {
			d := c.backoff(attempt)
			if d < 0 || d > bound {
				t.Fatalf("attempt %d: wait %v, want 0 to %v", attempt, d, bound)
			}
			low = low || d < bound/4
			high = high || d > bound*3/4
		}
		if !low || !high {
			t.Errorf("attempt %d: 2000 waits did not spread over 0 to %v", attempt, bound)
		}
	}
}

// TestRetryAfter reads Retry-After in seconds and as a date, of any size,
// a wait longer than a time.Duration holds as forever, and ignores what it
// cannot read.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, " 7 ": 7 * time.Second, "-1": 0, "+5": 0, "soon": 0,
		"999999999":                     999999999 * time.Second,
		"9223372036":                    9223372036 * time.Second,
		"9223372037":                    forever,
		"1000000000000":                 forever,
		"99999999999999999999999":       forever,
		"Wed, 02 Jan 2030 04:04:05 GMT": time.Hour,
		"Wed, 02 Jan 2030 02:04:05 GMT": 0,
		"Fri, 31 Dec 9999 23:59:59 GMT": forever,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
