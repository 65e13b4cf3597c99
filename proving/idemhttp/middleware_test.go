package idemhttp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

// loseFirst wraps h so that the first response is lost on its way: the
// middleware writes it in full, and the connection drops before a byte of it
// leaves. lost receives what was written.
func loseFirst(h http.Handler, lost chan<- reply) http.Handler {
	var done atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if done.Swap(true) {
			h.ServeHTTP(w, r)
			return
		}
		lw := &lostWriter{rep: reply{header: http.Header{}}}
		h.ServeHTTP(lw, r)
		lost <- lw.rep
		panic(http.ErrAbortHandler) // the server drops the connection
	})
}

type lostWriter struct{ rep reply }

func (w *lostWriter) Header() http.Header { return w.rep.header }
func (w *lostWriter) WriteHeader(code int) {
	if w.rep.status == 0 {
		w.rep.status = code
	}
}

func (w *lostWriter) Write(p []byte) (int, error) {
	if w.rep.status == 0 {
		w.rep.status = http.StatusOK
	}
	w.rep.body = append(w.rep.body, p...)
	return len(p), nil
}

func TestLostResponseReplays(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		lost := make(chan reply, 1)
		srv := start(t, loseFirst(e.protect(t)(e.orders()), lost))

		if _, err := trySend(srv, "POST", "/orders", keyHeader("order-1"), strings.NewReader(`{"item":"book"}`)); err == nil {
			t.Fatal("the first response arrived; it should have been lost")
		}
		first := <-lost
		wantRan(t, first, http.StatusCreated, 1)
		if first.header.Get("Set-Cookie") == "" {
			t.Error("the first response lacks the handler's Set-Cookie")
		}

		for i := 0; i < 2; i++ {
			rep := send(t, srv, "POST", "/orders", "order-1", `{"item":"book"}`)
			wantReplay(t, rep, first)
		}
		if n := e.runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
		res, err := e.lookup(t, "", "order-1")
		if err != nil || res.Outcome != idem.Replay || res.Response.Status != 201 || !bytes.Equal(res.Response.Body, first.body) {
			t.Errorf("Lookup = %v %d %q, %v; want the stored first response", res.Outcome, res.Response.Status, res.Response.Body, err)
		}
	})
}

func TestMismatch(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		srv := e.serve(t, e.orders())
		first := send(t, srv, "POST", "/orders", "k", `{"item":"book"}`)
		wantRan(t, first, http.StatusCreated, 1)

		for _, c := range []struct{ name, method, path, body string }{
			{"another body", "POST", "/orders", `{"item":"kettle"}`},
			{"another query", "POST", "/orders?express=1", `{"item":"book"}`},
			{"another path", "POST", "/refunds", `{"item":"book"}`},
			{"another method", "PATCH", "/orders", `{"item":"book"}`},
			{"no body", "POST", "/orders", ``},
		} {
			t.Run(c.name, func(t *testing.T) {
				rep := send(t, srv, c.method, c.path, "k", c.body)
				wantProblem(t, rep, http.StatusUnprocessableEntity, "key-reused", "")
				if bytes.Contains(rep.body, []byte(`order`)) || bytes.Contains(rep.body, []byte("book")) {
					t.Errorf("the 422 echoes the stored response or request: %s", rep.body)
				}
			})
		}
		if n := e.runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1: a mismatch writes nothing", n)
		}
		wantReplay(t, send(t, srv, "POST", "/orders", "k", `{"item":"book"}`), first)
	})
}

func TestScopesDoNotMeet(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		var h hook
		tenant := func(r *http.Request) (string, error) {
			switch v := r.Header.Get("X-Tenant"); v {
			case "":
				return "", errors.New("no tenant header")
			case "nobody":
				return "", nil
			default:
				return v, nil
			}
		}
		srv := start(t, e.protectScoped(t, tenant, h.option())(e.orders()))
		as := func(tenant, body string) reply {
			t.Helper()
			hdr := keyHeader("k")
			if tenant != "" {
				hdr.Set("X-Tenant", tenant)
			}
			return sendHeader(t, srv, "POST", "/orders", hdr, strings.NewReader(body))
		}

		acme := as("acme", "book")
		wantRan(t, acme, http.StatusCreated, 1)
		globex := as("globex", "book") // same key, same request: not acme's replay
		wantRan(t, globex, http.StatusCreated, 2)
		initech := as("initech", "kettle") // same key, another request: not a 422
		wantRan(t, initech, http.StatusCreated, 3)
		long := as(strings.Repeat("t", 4000), "book") // the stored key stays within the limit
		wantRan(t, long, http.StatusCreated, 4)

		wantReplay(t, as("acme", "book"), acme)
		wantReplay(t, as("globex", "book"), globex)
		wantProblem(t, as("acme", "kettle"), http.StatusUnprocessableEntity, "key-reused", "")
		if n := e.Effects.Total(t); n != 4 {
			t.Errorf("%d effect rows, want 4", n)
		}

		res, err := e.lookup(t, "globex", "k")
		if err != nil || !bytes.Equal(res.Response.Body, globex.body) {
			t.Errorf("Lookup(StoredKey(globex, k)) = %q, %v; want globex's response", res.Response.Body, err)
		}
		e.wantNoRecord(t, "", "k")

		t.Run("a scope function that fails", func(t *testing.T) {
			wantProblem(t, as("", "book"), http.StatusForbidden, "client-unknown", "")
			wantProblem(t, as("nobody", "book"), http.StatusForbidden, "client-unknown", "")
			if n := e.runs.Load(); n != 4 {
				t.Errorf("the handler ran %d times, want 4", n)
			}
			errs := h.reported()
			if len(errs) != 2 || !strings.Contains(errs[0].Error(), "no tenant header") || !strings.Contains(errs[1].Error(), "empty scope") {
				t.Errorf("ErrorHook got %v, want the scope function's error and the empty scope", errs)
			}
		})
	})
}

func TestRequestBody(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		srv := e.serve(t, e.orders(), idemhttp.WithMaxBodyBytes(16))

		t.Run("over the limit is 413", func(t *testing.T) {
			body := strings.Repeat("x", 17)
			wantProblem(t, send(t, srv, "POST", "/orders", "big", body), http.StatusRequestEntityTooLarge, "body-too-large", "")
			// Without a length, the body is counted as it is read.
			chunked := io.MultiReader(strings.NewReader(body))
			wantProblem(t, sendHeader(t, srv, "POST", "/orders", keyHeader("big"), chunked), http.StatusRequestEntityTooLarge, "body-too-large", "")
			if n := e.runs.Load(); n != 0 {
				t.Errorf("the handler ran %d times, want 0", n)
			}
			e.wantNoRecord(t, "", "big")
		})

		t.Run("the handler sees the body unchanged", func(t *testing.T) {
			body := "exactly\x00sixteen!"
			rep := sendHeader(t, srv, "POST", "/orders", keyHeader("fits"), io.MultiReader(strings.NewReader(body)))
			wantRan(t, rep, http.StatusCreated, 1)
			if want := fmt.Sprintf("{\"order\":1,\"got\":%q}\n\x00\xff", body); string(rep.body) != want {
				t.Errorf("body = %q, want %q", rep.body, want)
			}
		})

		t.Run("unprotected requests are not limited", func(t *testing.T) {
			rep := send(t, srv, "POST", "/orders", "", strings.Repeat("x", 100))
			wantRan(t, rep, http.StatusCreated, 2)
		})
	})
}

func TestInFlight(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		// Where the second request sees the key in flight, it waits the
		// 200 ms lock timeout (1 s on MariaDB) for a first request that
		// is released only after both 409s, so no load can let the
		// wait see it end; nothing is timed.
		e := setup(t, tg, idem.WithLockTimeout(200*time.Millisecond))
		started, release := make(chan struct{}), make(chan struct{})
		var held atomic.Bool
		orders := e.orders()
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !held.Swap(true) {
				close(started)
				<-release // the key stays claimed, uncommitted
			}
			orders.ServeHTTP(w, r)
		})
		srv := e.serve(t, slow)

		done := make(chan reply, 1)
		go func() {
			rep, err := trySend(srv, "POST", "/orders", keyHeader("k"), strings.NewReader("book"))
			if err != nil {
				t.Error(err)
			}
			done <- rep
		}()
		<-started
		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			// SQLite has no InFlight: the second request waits at BEGIN
			// for the first to finish, then replays it. The first is
			// released 300 ms from now, and the second waits for it up
			// to the 10 s busy timeout of sqliteParams, for each of
			// DoTx's attempts: load may stretch the 300 ms many times
			// over and the second still gets the lock. (If load delays
			// the second request past the release, it replays without
			// waiting, which passes too.)
			time.AfterFunc(300*time.Millisecond, func() { close(release) })
			second := send(t, srv, "POST", "/orders", "k", "book")
			first := <-done
			wantRan(t, first, http.StatusCreated, 1)
			wantReplay(t, second, first)
		} else {
			second := send(t, srv, "POST", "/orders", "k", "book")
			wantProblem(t, second, http.StatusConflict, "in-flight", "1")
			// A different request under the held key is in flight too:
			// its hash cannot be compared with an uncommitted record's.
			wantProblem(t, send(t, srv, "POST", "/orders", "k", "kettle"), http.StatusConflict, "in-flight", "1")
			close(release)
			first := <-done
			wantRan(t, first, http.StatusCreated, 1)
			wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
		}
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

func TestStorePolicy(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		t.Run("a 5xx is sent, rolled back and not stored", func(t *testing.T) {
			e := setup(t, tg)
			srv := e.serve(t, e.orders())
			e.status.Store(http.StatusInternalServerError)
			rep := send(t, srv, "POST", "/orders", "k", "book")
			wantRan(t, rep, http.StatusInternalServerError, 1)
			if want := "{\"order\":1,\"got\":\"book\"}\n\x00\xff"; string(rep.body) != want || rep.header.Get("Set-Cookie") != "session=s1; HttpOnly" {
				t.Errorf("got %q, Set-Cookie %q; want the handler's own response", rep.body, rep.header.Get("Set-Cookie"))
			}
			if n := e.Effects.Total(t); n != 0 {
				t.Errorf("%d effect rows, want 0: a 5xx rolls back", n)
			}
			e.wantNoRecord(t, "", "k")

			e.status.Store(http.StatusCreated)
			first := send(t, srv, "POST", "/orders", "k", "book")
			wantRan(t, first, http.StatusCreated, 2)
			wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
			if n := e.Effects.Total(t); n != 1 {
				t.Errorf("%d effect rows, want 1", n)
			}
		})

		t.Run("a 4xx is stored by default, with what the handler wrote", func(t *testing.T) {
			e := setup(t, tg)
			srv := e.serve(t, e.orders())
			e.status.Store(http.StatusBadRequest)
			first := send(t, srv, "POST", "/orders", "k", "book")
			wantRan(t, first, http.StatusBadRequest, 1)
			wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
			if n := e.Effects.Total(t); n != 1 {
				t.Errorf("%d effect rows, want 1", n)
			}
		})

		t.Run("a policy that stores below 400", func(t *testing.T) {
			e := setup(t, tg)
			srv := e.serve(t, e.orders(), idemhttp.WithStorePolicy(func(status int) bool { return status < 400 }))
			e.status.Store(http.StatusConflict)
			wantRan(t, send(t, srv, "POST", "/orders", "k", "book"), http.StatusConflict, 1)
			if n := e.Effects.Total(t); n != 0 {
				t.Errorf("%d effect rows, want 0", n)
			}
			e.wantNoRecord(t, "", "k")
			e.status.Store(http.StatusAccepted)
			first := send(t, srv, "POST", "/orders", "k", "book")
			wantRan(t, first, http.StatusAccepted, 2)
			wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
		})
	})
}

// wantTooLargeUndone checks what a response over the limit leaves behind:
// the ErrorHook told of ErrResponseTooLarge, no effect row and no record of
// key.
func (e *env) wantTooLargeUndone(t *testing.T, h *hook, key string) {
	t.Helper()
	if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrResponseTooLarge) {
		t.Errorf("ErrorHook got %v, want ErrResponseTooLarge", errs)
	}
	if n := e.Effects.Total(t); n != 0 {
		t.Errorf("%d effect rows, want 0: the request is undone", n)
	}
	e.wantNoRecord(t, "", key)
}

func TestResponseTooLarge(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithMaxResponseBytes(300))
		var h hook
		big := strings.Repeat("b", 1000)
		srv := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := e.insert(r.Context(), idemhttp.Tx(r.Context()), "big"); err != nil {
				t.Error(err)
			}
			w.WriteHeader(int(e.status.Load()))
			io.WriteString(w, big)
		}), h.option())

		wantProblem(t, send(t, srv, "POST", "/orders", "k", ""), http.StatusInternalServerError, "response-too-large", "")
		e.wantTooLargeUndone(t, &h, "k")

		// A 5xx is not stored, but it is held in memory all the same, so the
		// same limit holds: over it, the same problem.
		e.status.Store(http.StatusBadGateway)
		wantProblem(t, send(t, srv, "POST", "/orders", "k", ""), http.StatusInternalServerError, "response-too-large", "")
	})
}

func TestHandlerPanic(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		protect := e.protect(t)
		panicky := protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := e.insert(r.Context(), idemhttp.Tx(r.Context()), "doomed"); err != nil {
				t.Error(err)
			}
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "never sent")
			panic("handler bug")
		}))
		rec := &touched{header: http.Header{}}
		func() {
			defer func() {
				if v := recover(); v != "handler bug" {
					t.Errorf("recovered %v, want the handler's panic", v)
				}
			}()
			req, _ := http.NewRequest("POST", "/orders", strings.NewReader("book"))
			req.Header.Set("Idempotency-Key", "k")
			panicky.ServeHTTP(rec, req)
		}()
		if rec.wrote.Load() || len(rec.header) != 0 {
			t.Errorf("the panicking request wrote a response: %v", rec.header)
		}
		if n := e.Effects.Total(t); n != 0 {
			t.Errorf("%d effect rows, want 0", n)
		}
		e.wantNoRecord(t, "", "k")
		if n := e.DB.Stats().InUse; n != 0 {
			t.Errorf("%d connections still in use after the panic", n)
		}
		// The key is free: the next attempt runs.
		srv := start(t, protect(e.orders()))
		wantRan(t, send(t, srv, "POST", "/orders", "k", "book"), http.StatusCreated, 1)
	})
}

// touched is a ResponseWriter that notes whether anything was written to it.
type touched struct {
	header http.Header
	wrote  atomic.Bool
}

func (w *touched) Header() http.Header         { return w.header }
func (w *touched) WriteHeader(int)             { w.wrote.Store(true) }
func (w *touched) Write(p []byte) (int, error) { w.wrote.Store(true); return len(p), nil }

func TestUnprotectedRequestsPassThrough(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		srv := e.serve(t, e.orders())
		run := 0
		for _, method := range []string{"GET", "PUT", "DELETE"} {
			for i := 0; i < 2; i++ {
				run++
				wantRan(t, send(t, srv, method, "/orders", "k", "book"), http.StatusCreated, run)
				if e.sawTx.Load() {
					t.Errorf("Tx is not nil for %s", method)
				}
			}
		}
		e.wantNoRecord(t, "", "k")
		for i := 0; i < 2; i++ {
			run++
			wantRan(t, send(t, srv, "POST", "/orders", "", "book"), http.StatusCreated, run)
			if e.sawTx.Load() {
				t.Error("Tx is not nil for a request without a key")
			}
		}
		if n := e.Effects.Total(t); n != 0 {
			t.Errorf("%d effect rows, want 0", n)
		}

		t.Run("Methods chooses the protected methods", func(t *testing.T) {
			srv := e.serve(t, e.orders(), idemhttp.WithMethods("PUT"))
			first := send(t, srv, "PUT", "/orders/1", "put-key", "book")
			wantRan(t, first, http.StatusCreated, run+1)
			if !e.sawTx.Load() {
				t.Error("Tx is nil for a protected PUT")
			}
			wantReplay(t, send(t, srv, "PUT", "/orders/1", "put-key", "book"), first)
			wantRan(t, send(t, srv, "POST", "/orders", "post-key", "book"), http.StatusCreated, run+2)
			wantRan(t, send(t, srv, "POST", "/orders", "post-key", "book"), http.StatusCreated, run+3)
		})
	})
}

func TestReplayHeaders(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := e.insert(r.Context(), idemhttp.Tx(r.Context()), "x"); err != nil {
				t.Error(err)
			}
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Language", "de")
			h.Set("Location", "/orders/1")
			h["ETag"] = []string{`"v1"`} // not canonical: the allow-list still applies
			h.Add("Link", `</orders/1/items>; rel="items"`)
			h.Add("Link", `</customers/7>; rel="customer"`)
			h.Add("Set-Cookie", "session=s1")
			h.Add("Set-Cookie", "tracking=t1")
			h.Set("X-Custom", "c")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"order":1}`)
		})
		replayed := []string{"Content-Language", "Content-Type", "Etag", "Link", "Location"}

		srv := e.serve(t, handler)
		first := send(t, srv, "POST", "/orders", "k", "")
		if got := first.header.Values("Set-Cookie"); len(got) != 2 || first.header.Get("X-Custom") != "c" {
			t.Errorf("the first response lost the handler's headers: %v", first.header)
		}
		replay := send(t, srv, "POST", "/orders", "k", "")
		wantHeaders(t, replay.header, first.header, append(replayed, idemhttp.ReplayedHeader))
		if got := replay.header.Values("Link"); len(got) != 2 {
			t.Errorf("replayed Link = %q, want both values", got)
		}
		res, err := e.lookup(t, "", "k")
		if err != nil {
			t.Fatal(err)
		}
		wantHeaders(t, res.Response.Header, first.header, replayed) // stored in the first place

		t.Run("an extended allow-list", func(t *testing.T) {
			srv := e.serve(t, handler, idemhttp.WithReplayHeaders(append(idemhttp.DefaultReplayHeaders(), "x-custom")...))
			first := send(t, srv, "POST", "/orders", "k2", "")
			replay := send(t, srv, "POST", "/orders", "k2", "")
			wantHeaders(t, replay.header, first.header, append(replayed, "X-Custom", idemhttp.ReplayedHeader))
		})
	})
}

// wantHeaders fails the test unless h has exactly the headers names, with
// the values of first, besides those net/http adds to every response.
func wantHeaders(t *testing.T, h, first http.Header, names []string) {
	t.Helper()
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
		if name == idemhttp.ReplayedHeader {
			if h.Get(name) != "true" {
				t.Errorf("%s = %q, want true", name, h.Get(name))
			}
			continue
		}
		if !equal(h.Values(name), first.Values(name)) {
			t.Errorf("%s = %q, want %q", name, h.Values(name), first.Values(name))
		}
	}
	for name := range h {
		if !want[name] && name != "Date" && name != "Content-Length" {
			t.Errorf("header %s = %q must not be replayed", name, h[name])
		}
	}
}

func TestConflictIs503(t *testing.T) {
	// A busy SQLite database is a conflict that DoTx retries: with a short
	// busy timeout and another transaction holding the write lock, every
	// attempt fails at BEGIN.
	e := setup(t, dbtest.SQLite("_txlock=immediate&_pragma=busy_timeout(20)"))
	var h hook
	srv := e.serve(t, e.orders(), idemhttp.WithRetryAfter(1500*time.Millisecond), h.option())
	ctx := context.Background()
	holder, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()

	wantProblem(t, send(t, srv, "POST", "/orders", "k", "book"), http.StatusServiceUnavailable, "conflict", "2")
	if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrRetry) {
		t.Errorf("ErrorHook got %v, want ErrRetry", errs)
	}
	if n := e.runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times, want 0", n)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantRan(t, send(t, srv, "POST", "/orders", "k", "book"), http.StatusCreated, 1)
}

// TestHandlerCommitsItself shows what a client gets from a handler that
// commits the transaction it was given: a 500, since the response could not
// be stored, and then 409 on every retry, until an operator settles the key
// (idem.Store.Settle) and the retry replays what was settled.
func TestHandlerCommitsItself(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(0))
		var h hook
		srv := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx := idemhttp.Tx(r.Context())
			if err := e.insert(r.Context(), tx, "committed by the handler"); err != nil {
				t.Error(err)
			}
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
			w.WriteHeader(http.StatusCreated)
		}), h.option())

		wantProblem(t, send(t, srv, "POST", "/orders", "k", ""), http.StatusInternalServerError, "internal-error", "")
		if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrTxEnded) {
			t.Errorf("ErrorHook got %v, want ErrTxEnded", errs)
		}
		wantProblem(t, send(t, srv, "POST", "/orders", "k", ""), http.StatusConflict, "in-flight", "1")
		settled := idem.Response{Status: http.StatusCreated, Body: []byte("settled")}
		if err := e.Store.Settle(context.Background(), e.DB, idemhttp.StoredKey("", "k"), settled); err != nil {
			t.Fatal(err)
		}
		rep := send(t, srv, "POST", "/orders", "k", "")
		if rep.status != http.StatusCreated || string(rep.body) != "settled" || rep.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Errorf("after Settle the retry got %d %q, want the settled 201, replayed", rep.status, rep.body)
		}
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want the 1 the handler committed", n)
		}
	})
}

// TestHandlerCommitsItselfAndFails is TestHandlerCommitsItself for a
// handler that answers with a status that is not stored, a 500, after it
// committed: the client gets the handler's own response, as for any
// unstored status, and the error hook is told idem.ErrTxEnded, since the
// key now waits for an operator; idemgrpc tells its hook the same of a
// handler that commits and fails (its TestHandlerCommitsItselfAndFails).
// Earlier versions told the hook nothing, and the key's 409s came with no
// word of why.
func TestHandlerCommitsItselfAndFails(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithLockTimeout(0))
		var h hook
		srv := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx := idemhttp.Tx(r.Context())
			if err := e.insert(r.Context(), tx, "committed by the handler"); err != nil {
				t.Error(err)
			}
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
			http.Error(w, "the handler failed", http.StatusInternalServerError)
		}), h.option())

		rep := send(t, srv, "POST", "/orders", "k", "")
		if rep.status != http.StatusInternalServerError || !strings.Contains(string(rep.body), "the handler failed") {
			t.Errorf("%d %q, want the handler's own 500", rep.status, rep.body)
		}
		if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrTxEnded) {
			t.Errorf("ErrorHook got %v, want ErrTxEnded", errs)
		}
		wantProblem(t, send(t, srv, "POST", "/orders", "k", ""), http.StatusConflict, "in-flight", "1")
	})
}

func TestNothingLeavesBeforeCommit(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		type seen struct {
			early                           bool
			flushErr, hijackErr, hijackErr2 error
		}
		report := make(chan seen, 1)
		// atFirstByte counts the effect rows, from another connection,
		// when the first byte of the response is about to leave.
		atFirstByte := make(chan int, 1)
		protect := e.protect(t)
		srv := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			outer := &passOn{w: w, first: func() {
				var n int
				if err := e.DB.QueryRow("SELECT count(*) FROM " + e.Effects.Table).Scan(&n); err != nil {
					t.Error(err)
				}
				atFirstByte <- n
			}}
			protect(http.HandlerFunc(func(cw http.ResponseWriter, r *http.Request) {
				if err := e.insert(r.Context(), idemhttp.Tx(r.Context()), "x"); err != nil {
					t.Error(err)
				}
				cw.WriteHeader(http.StatusCreated)
				io.WriteString(cw, "first half, ")
				cw.(http.Flusher).Flush()
				rc := http.NewResponseController(cw)
				var s seen
				s.flushErr = rc.Flush()
				_, _, s.hijackErr = rc.Hijack()
				_, _, s.hijackErr2 = cw.(http.Hijacker).Hijack()
				s.early = outer.wrote.Load()
				report <- s
				io.WriteString(cw, "second half")
			})).ServeHTTP(outer, r)
		}))
		rep := send(t, srv, "POST", "/orders", "k", "")
		s := <-report
		if s.early {
			t.Error("bytes reached the client while the handler ran")
		}
		if n := <-atFirstByte; n != 1 {
			t.Errorf("%d effect rows committed when the response left, want 1", n)
		}
		if s.flushErr != nil {
			t.Errorf("ResponseController.Flush = %v, want nil", s.flushErr)
		}
		if s.hijackErr == nil || s.hijackErr2 == nil {
			t.Errorf("Hijack = %v, %v; want errors", s.hijackErr, s.hijackErr2)
		}
		if rep.status != http.StatusCreated || string(rep.body) != "first half, second half" {
			t.Errorf("got %d %q, want the whole response", rep.status, rep.body)
		}
	})
}

// passOn writes to w, and calls first before the first byte.
type passOn struct {
	w     http.ResponseWriter
	first func()
	wrote atomic.Bool
}

func (p *passOn) Header() http.Header { return p.w.Header() }

func (p *passOn) WriteHeader(code int) {
	if !p.wrote.Swap(true) {
		p.first()
	}
	p.w.WriteHeader(code)
}

func (p *passOn) Write(b []byte) (int, error) {
	if !p.wrote.Swap(true) {
		p.first()
	}
	return p.w.Write(b)
}
