package idemclient

import (
	"net/http"
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

// TestRetryAfter reads Retry-After in seconds and as a date, and ignores
// what it cannot read.
func TestRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, " 7 ": 7 * time.Second, "-1": 0, "soon": 0, "999999999": 0} {
		if got := retryAfter(v, time.Now()); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	date := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if got := retryAfter(date, time.Now()); got < 58*time.Minute || got > time.Hour {
		t.Errorf("retryAfter(%q) = %v, want about an hour", date, got)
	}
	if got := retryAfter(time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), time.Now()); got != 0 {
		t.Errorf("a date in the past: %v, want 0", got)
	}
}
