package idemhttp_test

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/runnerfuncs"
)

// TestNewWithRunner serves through a Runner that stands for another
// driver's DoTx and Run: each gets the key and hash that Identify
// computes, DoTx's serve runs the handler with the context it is given,
// Run gets the steps that Steps' function built, and the middleware
// answers from the Runner's Result as it does from the Store's.
func TestNewWithRunner(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idemhttp.NewWithRunner(store, nil, idemhttp.WithSingleClient()); err == nil || !strings.Contains(err.Error(), "nil runner") {
		t.Errorf("NewWithRunner(nil runner) = %v, want an error naming the nil runner", err)
	}
	if _, err := idemhttp.NewWithRunner(store, idem.SQLRunner(store, nil, nil), idemhttp.WithSingleClient()); err == nil || !strings.Contains(err.Error(), "nil runner") {
		t.Errorf("NewWithRunner(the Runner of a nil database) = %v, want an error naming the nil runner", err)
	}

	type txOfRunner struct{}
	var (
		outcome   idem.Outcome
		gotKey    string
		gotHash   []byte
		handlerTx any
	)
	stored := idem.Response{Status: 201, Body: []byte("stored")}
	var gotSteps []idem.Step
	built := []idem.Step{idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return stored, nil })}
	run := runnerfuncs.Runner{
		DoTxFunc: func(ctx context.Context, key string, reqHash []byte, serve func(context.Context) (idem.Response, error)) (idem.Result, error) {
			gotKey, gotHash = key, reqHash
			if outcome != idem.Claimed {
				return idem.Result{Outcome: outcome, Response: stored}, nil
			}
			resp, err := serve(context.WithValue(ctx, txOfRunner{}, "the runner's transaction"))
			return idem.Result{Outcome: idem.Claimed, Response: resp}, err
		},
		RunFunc: func(_ context.Context, key string, reqHash []byte, steps []idem.Step) (idem.Result, error) {
			gotKey, gotHash, gotSteps = key, reqHash, steps
			return idem.Result{Outcome: outcome, Response: stored}, nil
		},
	}
	m, err := idemhttp.NewWithRunner(store, run, idemhttp.WithSingleClient())
	if err != nil {
		t.Fatal(err)
	}
	steps := m.Steps(func(*http.Request) ([]idem.Step, error) { return built, nil })
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlerTx = r.Context().Value(txOfRunner{})
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("fresh"))
	}))
	request := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":1}`))
		r.Header.Set("Idempotency-Key", "k1")
		return r
	}
	for _, c := range []struct {
		outcome    idem.Outcome
		wantStatus int
		wantBody   string
	}{
		{idem.Claimed, 201, "fresh"},
		{idem.Replay, 201, "stored"},
		{idem.InFlight, 409, ""},
	} {
		outcome, handlerTx = c.outcome, nil
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request())
		if w.Code != c.wantStatus || (c.wantBody != "" && w.Body.String() != c.wantBody) {
			t.Errorf("%v: %d %q, want %d %q", c.outcome, w.Code, w.Body.String(), c.wantStatus, c.wantBody)
		}
		key, hash, err := m.Identify(request())
		if err != nil || gotKey != key || !bytes.Equal(gotHash, hash) {
			t.Errorf("%v: the runner got %q %x, Identify says %q %x (%v)", c.outcome, gotKey, gotHash, key, hash, err)
		}
		if c.outcome == idem.Claimed && handlerTx != "the runner's transaction" {
			t.Errorf("the handler's context carried %v, not the runner's transaction", handlerTx)
		}

		gotKey, gotHash, gotSteps = "", nil, nil
		w = httptest.NewRecorder()
		steps.ServeHTTP(w, request())
		if c.outcome != idem.InFlight {
			c.wantBody = "stored"
		}
		if w.Code != c.wantStatus || (c.wantBody != "" && w.Body.String() != c.wantBody) {
			t.Errorf("Steps, %v: %d %q, want %d %q", c.outcome, w.Code, w.Body.String(), c.wantStatus, c.wantBody)
		}
		if gotKey != key || !bytes.Equal(gotHash, hash) || len(gotSteps) != 1 {
			t.Errorf("Steps, %v: the runner got %q %x and %d steps, Identify says %q %x", c.outcome, gotKey, gotHash, len(gotSteps), key, hash)
		}
	}
}

// TestInFlightRetryAfterLease shows the Retry-After of a 409 for a
// multi-step request that a live runner holds, from Handler and from
// Steps: the lease left to it, when that is longer than the middleware's
// delay, since no retry can take the request over sooner; the
// middleware's delay otherwise.
func TestInFlightRetryAfterLease(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	var left time.Duration
	run := runnerfuncs.Runner{
		DoTxFunc: func(context.Context, string, []byte, func(context.Context) (idem.Response, error)) (idem.Result, error) {
			return idem.Result{Outcome: idem.InFlight, LeaseLeft: left}, nil
		},
		RunFunc: func(context.Context, string, []byte, []idem.Step) (idem.Result, error) {
			return idem.Result{Outcome: idem.InFlight, LeaseLeft: left}, nil
		},
	}
	m, err := idemhttp.NewWithRunner(store, run, idemhttp.WithSingleClient(), idemhttp.WithRetryAfter(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]http.Handler{
		"Handler": m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") })),
		"Steps": m.Steps(func(*http.Request) ([]idem.Step, error) {
			return []idem.Step{idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, nil })}, nil
		}),
	}
	for name, h := range handlers {
		for _, c := range []struct {
			left time.Duration
			want string
		}{{0, "2"}, {time.Second, "2"}, {6500 * time.Millisecond, "7"}} {
			left = c.left
			r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":1}`))
			r.Header.Set("Idempotency-Key", "k1")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != c.want {
				t.Errorf("%s, lease left %v: %d, Retry-After %q; want 409, %q", name, c.left, w.Code, w.Header().Get("Retry-After"), c.want)
			}
		}
	}
}
