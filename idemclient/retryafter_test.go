package idemclient_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/idemclient"
)

// fakeClock is a clock whose waits take no time: each wait is recorded and
// moves the clock on by its length.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	waits []time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.t = c.t.Add(d)
	return ctx.Err()
}

// TestRetryAfterOfAnySize answers a request with 503s whose Retry-After,
// in seconds or as a date, asks for waits of every size, and then with
// 201, to a client on a clock of the test's: Do waits exactly what the
// server asked for, a day or more included, while the wait ends within
// WithMaxElapsed from the first attempt; past it, by a second or by more
// than a time.Duration holds, Do takes no wait and returns the 503 at
// once, with GaveUp matching ErrMaxElapsed and naming the Retry-After.
func TestRetryAfterOfAnySize(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	date := func(d time.Duration) string { return start.Add(d).Format(http.TimeFormat) }
	const day, forever = 24 * time.Hour, time.Duration(math.MaxInt64)
	for _, c := range []struct {
		name       string
		maxElapsed time.Duration // zero for DefaultMaxElapsed
		retryAfter []string      // of the 503s before the 201
		waits      []time.Duration
		gaveUp     bool
	}{
		{"a day and a second, past the default", 0, []string{"86401"}, nil, true},
		{"a day and a second as a date, past the default", 0, []string{date(day + time.Second)}, nil, true},
		{"25 hours", 2 * day, []string{"90000"}, []time.Duration{25 * time.Hour}, false},
		{"25 hours as a date", 2 * day, []string{date(25 * time.Hour)}, []time.Duration{25 * time.Hour}, false},
		{"the whole maximum", 2 * day, []string{"172800"}, []time.Duration{2 * day}, false},
		{"a second past the maximum", 2 * day, []string{"172801"}, nil, true},
		{"a second past the maximum as a date", 2 * day, []string{date(2*day + time.Second)}, nil, true},
		{"past what the first wait left", 2 * day, []string{"3600", "169201"}, []time.Duration{time.Hour}, true},
		{"1e12 seconds", 2 * day, []string{"1000000000000"}, nil, true},
		{"1e12 seconds, the maximum as long as a Duration", forever, []string{"1000000000000"}, nil, true},
		{"more seconds than an int64", forever, []string{"99999999999999999999999"}, nil, true},
		{"the last date, the maximum as long as a Duration", forever, []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen attempts
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n := seen.record(r); n <= len(c.retryAfter) {
					w.Header().Set("Retry-After", c.retryAfter[n-1])
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			clock := &fakeClock{t: start}
			opts := []idemclient.Option{idemclient.WithClock(clock.now, clock.sleep)}
			if c.maxElapsed > 0 {
				opts = append(opts, idemclient.WithMaxElapsed(c.maxElapsed))
			}
			resp, err := fast(t, opts...).Do(post(t, srv.URL, "{}"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !slices.Equal(clock.waits, c.waits) {
				t.Errorf("waits %v, want %v", clock.waits, c.waits)
			}
			want, attempts := http.StatusCreated, len(c.waits)+1
			if c.gaveUp {
				want = http.StatusServiceUnavailable
			}
			if resp.StatusCode != want || resp.Attempts != attempts || seen.n() != attempts {
				t.Errorf("%d after %d attempts (%d seen), want %d after %d", resp.StatusCode, resp.Attempts, seen.n(), want, attempts)
			}
			if !c.gaveUp && resp.GaveUp != nil {
				t.Errorf("GaveUp %v for a final answer", resp.GaveUp)
			}
			if c.gaveUp {
				if last := c.retryAfter[len(c.waits)]; !errors.Is(resp.GaveUp, idemclient.ErrMaxElapsed) || !strings.Contains(resp.GaveUp.Error(), last) {
					t.Errorf("GaveUp %v, want ErrMaxElapsed naming Retry-After %q", resp.GaveUp, last)
				}
			}
		})
	}
}
