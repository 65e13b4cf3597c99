package idemhttp_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// TestInvalidStatus gives Handler and Steps responses whose status net/http
// cannot send, 0 and 1000, from every source: a handler's WriteHeader, a
// Final step, build's idem.Finish, and a record that DoTx stored directly,
// as an earlier version or a hand-written call may have left one. None may
// reach WriteHeader, where net/http panics, on the first answer or on a
// retry. One that nothing stored gets 500 internal-error, and its retry
// runs: the handler's is never stored, even under a policy that stores
// every status, and its effect is rolled back. One that is stored gets 500
// record-damaged, on the first answer and on every retry, and nothing runs
// again. Each time the error hook is told ErrInvalidStatus.
func TestInvalidStatus(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		for _, status := range []int{0, 1000} {
			t.Run(fmt.Sprint(status), func(t *testing.T) {
				e := setup(t, tg)
				var h hook
				mw := mustNew(t, e.Store, e.DB, idemhttp.WithSingleClient(), h.option(),
					idemhttp.WithStorePolicy(func(int) bool { return true }))
				mux := http.NewServeMux()
				mux.Handle("/orders", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					e.runs.Add(1)
					if err := e.Effects.Insert(r.Context(), idemhttp.Tx(r.Context()), r.Header.Get("Idempotency-Key"), "order"); err != nil {
						t.Error(err)
					}
					w.Header().Set("Content-Type", "text/plain")
					w.WriteHeader(status)
					io.WriteString(w, "made")
				})))
				mux.Handle("/checkout", mw.Steps(func(r *http.Request) ([]idem.Step, error) {
					key := r.Header.Get("Idempotency-Key")
					return []idem.Step{idem.Final("receipt", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
						e.runs.Add(1)
						return idem.Response{Status: status, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("made")},
							e.Effects.Insert(ctx, tx, key, "checkout")
					})}, nil
				}))
				mux.Handle("/refused", mw.Steps(func(*http.Request) ([]idem.Step, error) {
					return nil, idem.Finish(idem.Response{Status: status, Body: []byte("refused")})
				}))
				mux.Handle("/stored", mw.Handler(e.orders()))
				srv := httptest.NewServer(mux)
				defer srv.Close()

				// answers sends the request at path under key twice, and
				// checks both answers and what the hook was told of them.
				answers := func(t *testing.T, path, key, kind string) {
					t.Helper()
					for range 2 {
						before := len(h.reported())
						wantProblem(t, send(t, srv, "POST", path, key, ""), http.StatusInternalServerError, kind, "")
						if errs := h.reported()[before:]; len(errs) != 1 || !errors.Is(errs[0], idemhttp.ErrInvalidStatus) ||
							!strings.Contains(errs[0].Error(), fmt.Sprint(status)) {
							t.Errorf("%s: the error hook was told %v, want ErrInvalidStatus with the status", path, errs)
						}
					}
				}

				t.Run("handler", func(t *testing.T) {
					e.runs.Store(0)
					answers(t, "/orders", "k1", "internal-error")
					if n := e.runs.Load(); n != 2 {
						t.Errorf("the handler ran %d times, want 2: nothing was stored, so the retry runs", n)
					}
					if n := e.Effects.Count(t, "k1"); n != 0 {
						t.Errorf("%d effect rows, want 0: the handler's request is undone", n)
					}
					e.wantNoRecord(t, "", "k1")
				})
				t.Run("final step", func(t *testing.T) {
					e.runs.Store(0)
					answers(t, "/checkout", "k2", "record-damaged")
					if n := e.runs.Load(); n != 1 {
						t.Errorf("the Final step ran %d times, want 1: its response is stored", n)
					}
					if n := e.Effects.Count(t, "k2"); n != 1 {
						t.Errorf("%d effect rows, want 1: the Final step committed", n)
					}
					if res, err := e.lookup(t, "", "k2"); err != nil || res.Outcome != idem.Replay || res.Response.Status != status {
						t.Errorf("Lookup(k2) = %v %d, %v; want the stored status %d", res.Outcome, res.Response.Status, err, status)
					}
				})
				t.Run("build", func(t *testing.T) {
					answers(t, "/refused", "k3", "internal-error")
					e.wantNoRecord(t, "", "k3")
				})
				// A record that DoTx stored with the request's key and hash, as
				// an earlier version or a hand-written call may have left it.
				t.Run("stored by DoTx", func(t *testing.T) {
					e.runs.Store(0)
					req, err := http.NewRequest("POST", srv.URL+"/stored", strings.NewReader(""))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Idempotency-Key", "k4")
					key, hash, err := mw.Identify(req)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := e.Store.DoTx(context.Background(), e.DB, nil, key, hash, e.Effect("k4", idem.Response{Status: status})); err != nil {
						t.Fatal(err)
					}
					answers(t, "/stored", "k4", "record-damaged")
					if n := e.runs.Load(); n != 0 {
						t.Errorf("the handler ran %d times for a stored record, want 0", n)
					}
				})
			})
		}
	})
}
