package idemclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/idemclient"
)

// attempts records what a server saw of each attempt.
type attempts struct {
	mu     sync.Mutex
	keys   []string
	bodies []string
}

func (a *attempts) record(r *http.Request) int {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys = append(a.keys, r.Header.Get("Idempotency-Key"))
	a.bodies = append(a.bodies, string(b))
	return len(a.keys)
}

func (a *attempts) n() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.keys)
}

// fast is a client whose back-off is short, for the tests that count
// attempts.
func fast(t *testing.T, opts ...idemclient.Option) *idemclient.Client {
	t.Helper()
	c, err := idemclient.New(append([]idemclient.Option{idemclient.WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func post(t *testing.T, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestOneKeyPerIntention retries a request through two 503s: every attempt
// carries the same key, a new random one since the request had none, and
// the same body, and the caller learns the key and the attempts.
func TestOneKeyPerIntention(t *testing.T) {
	var seen attempts
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.record(r) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	resp, err := fast(t).Do(post(t, srv.URL, `{"item":"book"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Attempts != 3 || !resp.Replayed {
		t.Errorf("%d after %d attempts, replayed %v; want 201 after 3, replayed", resp.StatusCode, resp.Attempts, resp.Replayed)
	}
	if len(resp.Key) < 26 {
		t.Errorf("key %q: want at least 128 random bits", resp.Key)
	}
	for i := range seen.keys {
		if seen.keys[i] != resp.Key || seen.bodies[i] != `{"item":"book"}` {
			t.Errorf("attempt %d: key %q body %q, want %q and the request's body", i+1, seen.keys[i], seen.bodies[i], resp.Key)
		}
	}

	req := post(t, srv.URL, "{}")
	req.Header.Set("Idempotency-Key", "order-17")
	resp, err = fast(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Key != "order-17" || seen.keys[len(seen.keys)-1] != "order-17" {
		t.Errorf("the request's own key: sent %q, reported %q", seen.keys[len(seen.keys)-1], resp.Key)
	}
	if a, b := idemclient.NewKey(), idemclient.NewKey(); a == b {
		t.Errorf("NewKey returned %q twice", a)
	}
}

// TestNilHeader sends a request whose Header is nil, as http.Client
// accepts it: every attempt carries the key, and the caller's request is
// left as it was, its Header nil.
func TestNilHeader(t *testing.T) {
	var seen attempts
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.record(r) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	req := post(t, srv.URL, "{}")
	req.Header = nil
	resp, err := fast(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Attempts != 2 {
		t.Errorf("%d after %d attempts, want 201 after 2", resp.StatusCode, resp.Attempts)
	}
	for i, k := range seen.keys {
		if k == "" || k != resp.Key {
			t.Errorf("attempt %d: key %q, want %q", i+1, k, resp.Key)
		}
	}
	if req.Header != nil {
		t.Errorf("the caller's request got the header %v", req.Header)
	}
}

// problem writes idemhttp's problem of slug under base.
func problem(w http.ResponseWriter, base, slug string, status int, retryAfter string) {
	w.Header().Set("Content-Type", "application/problem+json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":%q,"title":"t","status":%d,"detail":"d"}`, base+slug, status)
}

// TestWhatIsRetried answers the first attempt with each kind of answer,
// and the second with 201: the answers that may succeed on a retry with
// the same key are retried, by their problem type where idemhttp sends
// one and by their status otherwise, and the others are final.
func TestWhatIsRetried(t *testing.T) {
	const base = idemclient.DefaultProblemTypeBase
	type answer func(w http.ResponseWriter)
	status := func(code int, retryAfter string) answer {
		return func(w http.ResponseWriter) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(code)
		}
	}
	prob := func(base, slug string, code int) answer {
		return func(w http.ResponseWriter) { problem(w, base, slug, code, "0") }
	}
	for _, c := range []struct {
		name    string
		first   answer
		retried bool
	}{
		{"in-flight", prob(base, "in-flight", 409), true},
		{"conflict", prob(base, "conflict", 503), true},
		{"unfinished", prob(base, "unfinished", 503), true},
		{"outcome-unknown", prob(base, "outcome-unknown", 503), true},
		{"key-reused", prob(base, "key-reused", 422), false},
		{"response-too-large", prob(base, "response-too-large", 500), false},
		{"record-damaged", prob(base, "record-damaged", 500), false},
		{"internal-error", prob(base, "internal-error", 500), false},
		{"invalid-key", prob(base, "invalid-key", 400), false},
		{"idemhttp's 503 of another kind", prob(base, "some-later-kind", 503), false},
		{"the application's 409 problem", prob("https://api.example.com/problems/", "in-flight", 409), false},
		{"the application's 409", status(409, ""), false},
		{"the application's 503 problem", prob("https://api.example.com/problems/", "down", 503), true},
		{"429", status(429, "0"), true},
		{"503", status(503, "0"), true},
		{"502", status(502, ""), true},
		{"504", status(504, ""), true},
		{"500", status(500, ""), false},
		{"400", status(400, ""), false},
		{"404", status(404, ""), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen attempts
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if seen.record(r) == 1 {
					c.first(w)
					return
				}
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			resp, err := fast(t, idemclient.WithMaxAttempts(3)).Do(post(t, srv.URL, "{}"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := 1
			if c.retried {
				want = 2
			}
			if resp.Attempts != want || seen.n() != want {
				t.Errorf("%d attempts (%d seen), want %d", resp.Attempts, seen.n(), want)
			}
			if !c.retried && strings.Contains(resp.Header.Get("Content-Type"), "problem") && !strings.Contains(string(body), `"type"`) {
				t.Errorf("the final problem's body %q was not given back whole", body)
			}
		})
	}

	var seen attempts
	custom := "https://api.example.com/problems/"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.record(r) == 1 {
			problem(w, custom, "in-flight", 409, "0")
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	resp, err := fast(t, idemclient.WithProblemTypeBase(custom)).Do(post(t, srv.URL, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Attempts != 2 {
		t.Errorf("in-flight under the base of WithProblemTypeBase: %d attempts, want 2", resp.Attempts)
	}
}

// TestNoAnswerIsRetried has the first attempt's connection closed before
// an answer, and the second wait past the client's timeout: both are
// retried, with the same key, and the third attempt's answer is final.
func TestNoAnswerIsRetried(t *testing.T) {
	var seen attempts
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch seen.record(r) {
		case 1:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // a reset: no answer at all
			}
		case 2:
			<-r.Context().Done() // past the client's timeout, which ends the request
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	hc := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := fast(t, idemclient.WithHTTPClient(hc)).Do(post(t, srv.URL, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Attempts != 3 {
		t.Errorf("%d after %d attempts, want 201 after 3", resp.StatusCode, resp.Attempts)
	}
	if seen.keys[0] != seen.keys[1] || seen.keys[1] != seen.keys[2] {
		t.Errorf("keys %q: want one", seen.keys)
	}
}

// TestLimits shows where Do stops: at the attempts of WithMaxAttempts, with
// the last answer; before a Retry-After that would pass the context's
// deadline or WithMaxElapsed, with the answer that asked for it, and
// Response.GaveUp saying which limit it met; with an
// *Error when the last attempt got no answer, or the context ended during
// a wait.
func TestLimits(t *testing.T) {
	var seen attempts
	retryIn := "0"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.record(r)
		w.Header().Set("Retry-After", retryIn)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	resp, err := fast(t, idemclient.WithMaxAttempts(4)).Do(post(t, srv.URL, "{}"))
	if err != nil || resp.StatusCode != 503 || resp.Attempts != 4 || !errors.Is(resp.GaveUp, idemclient.ErrMaxAttempts) {
		t.Errorf("max attempts: %v, %v; want the fourth 503, given up with ErrMaxAttempts", resp, err)
	} else {
		resp.Body.Close()
	}

	retryIn = "30"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	clock := &fakeClock{t: time.Now()}
	resp, err = fast(t, idemclient.WithClock(clock.now, clock.sleep)).Do(post(t, srv.URL, "{}").WithContext(ctx))
	if err != nil || resp.Attempts != 1 || len(clock.waits) > 0 || !errors.Is(resp.GaveUp, context.DeadlineExceeded) {
		t.Errorf("a Retry-After past the deadline: %v, %v after the waits %v; want the first 503 without a wait, given up with context.DeadlineExceeded", resp, err, clock.waits)
	} else {
		resp.Body.Close()
	}
	resp, err = fast(t, idemclient.WithMaxElapsed(time.Second)).Do(post(t, srv.URL, "{}"))
	if err != nil || resp.Attempts != 1 || !errors.Is(resp.GaveUp, idemclient.ErrMaxElapsed) {
		t.Errorf("a Retry-After past WithMaxElapsed: %v, %v; want the first 503, given up with ErrMaxElapsed", resp, err)
	} else {
		resp.Body.Close()
	}

	answered := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		answered <- struct{}{}
	}))
	defer slow.Close()
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		<-answered
		cancel() // in the wait after the first attempt, or as its answer arrives
	}()
	_, err = fast(t).Do(post(t, slow.URL, "{}").WithContext(ctx))
	var e *idemclient.Error
	if !errors.As(err, &e) || !errors.Is(err, context.Canceled) || e.Attempts != 1 || e.Key == "" {
		t.Errorf("cancelled during a wait: %v, want an *Error after 1 attempt that matches context.Canceled", err)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	_, err = fast(t, idemclient.WithMaxAttempts(2)).Do(post(t, dead.URL, "{}"))
	if !errors.As(err, &e) || e.Attempts != 2 {
		t.Errorf("no server: %v, want an *Error after 2 attempts", err)
	}
}

// closes counts the response bodies that were closed.
type closes struct {
	mu     sync.Mutex
	closed map[int]bool
	n      int
}

type countedBody struct {
	io.ReadCloser
	c *closes
	i int
}

func (b *countedBody) Close() error {
	b.c.mu.Lock()
	b.c.closed[b.i] = true
	b.c.mu.Unlock()
	return b.ReadCloser.Close()
}

type countingTransport struct{ c *closes }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.c.mu.Lock()
	t.c.n++
	resp.Body = &countedBody{ReadCloser: resp.Body, c: t.c, i: t.c.n}
	t.c.mu.Unlock()
	return resp, nil
}

// TestBodies shows that Do refuses a body it could not send again, before
// any attempt, and that it closes the body of every answer but the last,
// which is the caller's to read.
func TestBodies(t *testing.T) {
	var seen attempts
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.record(r) < 3 {
			problem(w, idemclient.DefaultProblemTypeBase, "conflict", 503, "0")
			return
		}
		fmt.Fprint(w, "done")
	}))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("{}")))
	if _, err := fast(t).Do(req); !errors.Is(err, idemclient.ErrBodyNotReplayable) || seen.n() != 0 {
		t.Errorf("a body without GetBody: %v after %d attempts, want ErrBodyNotReplayable before any", err, seen.n())
	}

	c := &closes{closed: map[int]bool{}}
	resp, err := fast(t, idemclient.WithHTTPClient(&http.Client{Transport: countingTransport{c}})).Do(post(t, srv.URL, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	if !c.closed[1] || !c.closed[2] || c.closed[3] {
		t.Errorf("closed bodies %v, want the first two and not the last", c.closed)
	}
	c.mu.Unlock()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "done" {
		t.Errorf("the last body: %q", body)
	}
}

// TestOptions shows New refusing every bad option at once.
func TestOptions(t *testing.T) {
	_, err := idemclient.New(idemclient.WithMaxAttempts(0), idemclient.WithBackoff(time.Second, time.Millisecond),
		idemclient.WithKeyHeader("no good"), idemclient.WithHTTPClient(nil), idemclient.WithMaxElapsed(0), idemclient.WithProblemTypeBase(""))
	for _, want := range []string{"attempts", "back-off", "header", "http.Client", "elapsed", "base"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want it to name %s", err, want)
		}
	}
	var zero idemclient.Client
	if _, err := zero.Do(post(t, "http://127.0.0.1:1", "")); err == nil {
		t.Error("a zero Client sent a request")
	}
}
