package idemhttp_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
	"github.com/idemgo/idem/proving/fault"
)

// faultyEnv is an env on SQLite whose connections obey the faults it
// returns.
func faultyEnv(t *testing.T) (*env, *fault.Lossy) {
	t.Helper()
	f := &fault.Lossy{}
	tg := dbtest.SQLite(sqliteParams)
	tg.Wrap = f.Connector
	return setup(t, tg), f
}

// attempts wraps h so that it records the body each run read, sets a
// header only its first run sets, and calls before(run) first.
type attempts struct {
	mu     sync.Mutex
	bodies []string
}

func (a *attempts) wrap(h http.Handler, before func(run int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.bodies = append(a.bodies, string(b))
		run := len(a.bodies)
		a.mu.Unlock()
		if run == 1 {
			w.Header().Set("X-First-Attempt", "yes")
		}
		before(run)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		h.ServeHTTP(w, r)
	})
}

func (a *attempts) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bodies...)
}

func TestCommitFailure(t *testing.T) {
	t.Run("the commit is lost and the lookup fails: 503, then the retry runs", func(t *testing.T) {
		e, f := faultyEnv(t)
		var h hook
		var a attempts
		srv := e.serve(t, a.wrap(e.orders(), func(run int) {
			if run == 1 {
				f.SetCommit(fault.DropCommit)
				f.FailQueries(true) // the claim has run; the lookup will fail
			}
		}), h.option())

		rep := send(t, srv, "POST", "/orders", "k", "book")
		f.FailQueries(false)
		wantProblem(t, rep, http.StatusServiceUnavailable, "outcome-unknown", "1")
		if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrCommitUnknown) {
			t.Errorf("ErrorHook got %v, want ErrCommitUnknown", errs)
		}
		if n := e.Effects.Total(t); n != 0 {
			t.Errorf("%d effect rows, want 0: the commit was dropped", n)
		}
		first := send(t, srv, "POST", "/orders", "k", "book")
		wantRan(t, first, http.StatusCreated, 2)
		wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the commit is lost and nothing was stored: the handler runs again", func(t *testing.T) {
		e, f := faultyEnv(t)
		var a attempts
		srv := e.serve(t, a.wrap(e.orders(), func(run int) {
			if run == 1 {
				f.SetCommit(fault.DropCommit)
			}
		}))
		body := "book\x00" + strings.Repeat("b", 5000)
		rep := send(t, srv, "POST", "/orders", "k", body)
		wantRan(t, rep, http.StatusCreated, 2)
		if rep.header.Get("X-First-Attempt") != "" {
			t.Error("the response carries a header of the attempt that was rolled back")
		}
		if seen := a.seen(); len(seen) != 2 || seen[0] != body || seen[1] != body {
			t.Errorf("the attempts read %d bodies, want the whole body twice", len(seen))
		}
		wantReplay(t, send(t, srv, "POST", "/orders", "k", body), rep)
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the commit went through but its reply was lost", func(t *testing.T) {
		e, f := faultyEnv(t)
		var a attempts
		srv := e.serve(t, a.wrap(e.orders(), func(int) { f.SetCommit(fault.LoseReply) }))
		first := send(t, srv, "POST", "/orders", "k", "book")
		wantRan(t, first, http.StatusCreated, 1)
		if first.header.Get("X-First-Attempt") != "yes" {
			t.Error("the response is not the handler's")
		}
		wantReplay(t, send(t, srv, "POST", "/orders", "k", "book"), first)
		if n, want := len(a.seen()), 1; n != want {
			t.Errorf("the handler ran %d times, want %d", n, want)
		}
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}
