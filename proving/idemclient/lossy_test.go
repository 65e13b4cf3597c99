package idemclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem/idemclient"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

// The faults of lossyProxy, by attempt of each intention: the first
// attempt reaches the server, which commits, and its answer is lost, so
// that every retry must be answered from the stored record; the second
// attempt's connection is reset before it reaches the server; the third
// reaches the server and its answer is held until the client's timeout has
// ended the attempt; the fourth, and any after it, go through.
var faults = []string{"lose the answer", "reset", "hold past the timeout", "pass"}

// lossyProxy stands between the clients and the server on loopback, and
// hurts the attempts of each intention, which the X-Intention header names,
// as faults says. It forwards over a connection of its own per attempt.
type lossyProxy struct {
	backend string
	mu      sync.Mutex
	seen    map[string]int // attempts by intention
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	intention := r.Header.Get("X-Intention")
	p.mu.Lock()
	n := p.seen[intention]
	p.seen[intention]++
	p.mu.Unlock()
	fault := faults[min(n, len(faults)-1)]

	drop := func() {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}
	if fault == "reset" {
		drop()
		return
	}
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.backend+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := (&http.Transport{DisableKeepAlives: true}).RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
	case fault == "lose the answer":
		drop() // the server has committed, and answered
	case fault == "hold past the timeout":
		<-r.Context().Done() // the client's timeout ends the attempt
		drop()
	default:
		for name, values := range resp.Header {
			w.Header()[name] = values
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}
}

// newKeyEachAttempt is the mistake the client exists to prevent: a
// transport that puts a new key on every attempt, as a client that makes
// its key per HTTP call does.
type newKeyEachAttempt struct{ base http.RoundTripper }

func (t newKeyEachAttempt) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Idempotency-Key", idemclient.NewKey())
	return t.base.RoundTrip(r)
}

// TestLossyNetwork sends many intentions at once, each an order with a
// client of this package, through lossyProxy to idemhttp's middleware on
// every database, where the handler writes one effect row per run: every
// intention has exactly one effect, and every final answer is the answer
// stored for its key, a replay after three failed attempts. The same run
// with a client that makes a new key per attempt ends with an effect per
// attempt that reached the server, which is what the test exists to catch.
func TestLossyNetwork(t *testing.T) {
	dbtest.ForEach(t, dbtest.Targets(), func(t *testing.T, tg dbtest.Target) {
		for _, c := range []struct {
			name      string
			transport http.RoundTripper
			once      bool // one effect per intention
		}{
			{"one key per intention", &http.Transport{DisableKeepAlives: true}, true},
			// Attempts 1, 3 and 4 of the plan reach the server, each
			// under a key of its own.
			{"a new key per attempt", newKeyEachAttempt{&http.Transport{DisableKeepAlives: true}}, false},
		} {
			t.Run(c.name, func(t *testing.T) { lossyRun(t, tg, c.transport, c.once) })
		}
	})
}

// lossyRun is TestLossyNetwork on tg with a client whose attempts go
// through transport: once says whether every intention must have one
// effect, or, for the client that gets keys wrong, more than one.
func lossyRun(t *testing.T, tg dbtest.Target, transport http.RoundTripper, once bool) {
	e := tg.Setup(t)
	var runs atomic.Int64
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var o struct{ Intention string }
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			http.Error(w, "bad order", http.StatusBadRequest)
			return
		}
		if err := e.Effects.Insert(r.Context(), idemhttp.Tx(r.Context()), o.Intention, "order"); err != nil {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"intention":%q,"run":%d}`, o.Intention, runs.Add(1))
	})
	mw, err := idemhttp.New(e.Store, e.DB, nil, idemhttp.WithSingleClient())
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewServer(mw.Handler(orders))
	defer backend.Close()

	const intentions = 16
	proxy := &lossyProxy{backend: backend.URL, seen: map[string]int{}}
	front := httptest.NewServer(proxy)
	defer front.Close()

	// The timeout ends the held attempt; an attempt that a busy machine
	// makes outlast it too is one more retry, which the attempts allow.
	client, err := idemclient.New(
		idemclient.WithHTTPClient(&http.Client{Timeout: 2 * time.Second, Transport: transport}),
		idemclient.WithMaxAttempts(2*len(faults)),
		idemclient.WithBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	finals := make([]*idemclient.Response, intentions)
	bodies := make([][]byte, intentions)
	for i := range intentions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			intention := fmt.Sprint("i", i)
			req, _ := http.NewRequest(http.MethodPost, front.URL+"/orders", strings.NewReader(`{"intention":"`+intention+`"}`))
			req.Header.Set("X-Intention", intention)
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s: %v", intention, err)
				return
			}
			bodies[i], _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			finals[i] = resp
		}()
	}
	wg.Wait()

	for i, resp := range finals {
		intention := fmt.Sprint("i", i)
		n := e.EffectCount(t, intention)
		switch {
		case once && n != 1:
			t.Errorf("%s: %d effects, want 1", intention, n)
		case !once && n < 2:
			t.Errorf("%s: %d effects with a new key per attempt: the faults did not reach the server", intention, n)
		}
		if resp == nil || !once {
			continue
		}
		if resp.StatusCode != http.StatusCreated || !resp.Replayed || resp.Attempts < len(faults) {
			t.Errorf("%s: %d, replayed %v, after %d attempts; want the stored 201, replayed, after %d or more", intention, resp.StatusCode, resp.Replayed, resp.Attempts, len(faults))
		}
		stored, err := e.Store.Lookup(context.Background(), e.DB, idemhttp.StoredKey("", resp.Key))
		if err != nil {
			t.Errorf("%s: %v", intention, err)
			continue
		}
		if stored.Response.Status != resp.StatusCode || !bytes.Equal(stored.Response.Body, bodies[i]) {
			t.Errorf("%s: final answer %d %q, stored %d %q", intention, resp.StatusCode, bodies[i], stored.Response.Status, stored.Response.Body)
		}
	}
}
