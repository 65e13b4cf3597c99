package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// singleClientService is an order service behind idemhttp made with
// WithSingleClient, as the tests send it requests: each request places an
// order in the effects table, unless its path says otherwise.
type singleClientService struct {
	h  http.Handler
	fx *effects
}

func newSingleClientService(t *testing.T, tb *testDB, store *idem.Store) *singleClientService {
	t.Helper()
	mw, err := idemhttp.New(store, tb.db, nil, idemhttp.WithSingleClient())
	if err != nil {
		t.Fatal(err)
	}
	s := &singleClientService{fx: newEffects(t, tb)}
	s.h = mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := idemhttp.Tx(r.Context())
		key := r.Header.Get("Idempotency-Key")
		// /orders/stuck places the order and commits the transaction
		// itself; /orders/stuck-no-effect commits without placing it.
		if r.URL.Path != "/orders/stuck-no-effect" {
			if err := s.fx.Insert(r.Context(), tx, key, "placed"); err != nil {
				t.Error(err)
			}
		}
		if strings.HasPrefix(r.URL.Path, "/orders/stuck") {
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("placed " + key))
	}))
	return s
}

// send sends a POST to path with key, and returns what the client got.
func (s *singleClientService) send(path, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, nil)
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

// TestSingleClient runs inspect, settle, release and forget, built as go
// build makes them, on records that idemhttp stored for a service made with
// WithSingleClient, under idemhttp.StoredKey("", key): -single-client
// reaches each record, where the key alone finds none (exit 3), -scope ""
// is refused as a usage error that names -single-client (2), and so is
// -single-client beside -scope. What the commands did shows in what the
// client's retry gets next.
func TestSingleClient(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		store := tb.store(t)
		svc := newSingleClientService(t, tb, store)
		cmd := func(name string, more ...string) result {
			t.Helper()
			return runBuilt(t, append([]string{name}, tb.args(more...)...)...)
		}
		// notFound checks the line of a key with no record, named as
		// the command names it.
		notFound := func(t *testing.T, r result, op, name string) {
			t.Helper()
			wantError(t, r, exitNotFound, `idem: no live record for key `+name+`: it was never committed, it expired, or it was purged; nothing to `+op+
				` (check -key, and -scope or -single-client for a key that came through idemhttp or idemgrpc)`)
		}
		send := func(t *testing.T, path, key string, status int, body string) {
			t.Helper()
			if w := svc.send(path, key); w.Code != status || (body != "" && w.Body.String() != body) {
				t.Fatalf("POST %s with %s: %d %q, want %d %q", path, key, w.Code, w.Body, status, body)
			}
		}

		t.Run("Inspect", func(t *testing.T) {
			send(t, "/orders", "order-1", http.StatusCreated, "placed order-1")
			r := cmd("inspect", "-key", "order-1")
			r.wantCode(t, exitNotFound)
			if !strings.Contains(r.stdout, "needs -scope or -single-client") {
				t.Errorf("inspect of a key that is not found:\n%s\nwant it to name -single-client", r.stdout)
			}
			r = cmd("inspect", "-single-client", "-key", "order-1")
			r.wantCode(t, exitOK)
			for _, want := range []string{
				`key      "` + idemhttp.StoredKey("", "order-1") + `"` + "\n",
				"state    finished: ",
				"status   201 Created\n",
				"placed order-1\n",
			} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("inspect -single-client:\n%s\nwant %q", r.stdout, want)
				}
			}
		})

		t.Run("Refused", func(t *testing.T) {
			for _, c := range []struct {
				args []string
				msg  string
			}{
				{[]string{"inspect", "-scope", "", "-key", "order-1"}, "idem: -scope is empty: for a key stored through a service made with WithSingleClient, give -single-client; run 'idem inspect -h' for help"},
				{[]string{"forget", "-scope=", "-key", "order-1"}, "idem: -scope is empty: for a key stored through a service made with WithSingleClient, give -single-client; run 'idem forget -h' for help"},
				{[]string{"settle", "-scope", "acct_42", "-single-client", "-key", "order-1", "-status", "201"}, "idem: give -scope or -single-client, not both: -scope for a service made with WithScope, -single-client for one made with WithSingleClient; run 'idem settle -h' for help"},
				{[]string{"release", "-single-client", "-scope", "acct_42", "-key", "order-1", "-no-effect"}, "idem: give -scope or -single-client, not both"},
			} {
				r := cmd(c.args[0], c.args[1:]...)
				r.wantCode(t, exitUsage)
				if !strings.HasPrefix(r.stderr, c.msg) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
					t.Errorf("idem %s: stdout %q, stderr %q; want one line starting %q", strings.Join(c.args, " "), r.stdout, r.stderr, c.msg)
				}
			}
		})

		t.Run("Settle", func(t *testing.T) {
			send(t, "/orders/stuck", "order-2", http.StatusInternalServerError, "")
			send(t, "/orders/stuck", "order-2", http.StatusConflict, "")
			notFound(t, cmd("settle", "-key", "order-2", "-status", "201", "-body", "settled"), "settle", `"order-2"`)
			r := cmd("settle", "-single-client", "-key", "order-2", "-status", "201", "-body", "settled")
			r.wantCode(t, exitOK)
			if !strings.HasPrefix(r.stdout, `key      "`+idemhttp.StoredKey("", "order-2")+`"`+"\n") {
				t.Errorf("settle -single-client:\n%s", r.stdout)
			}
			send(t, "/orders/stuck", "order-2", http.StatusCreated, "settled")
			if n := svc.fx.Count(t, "order-2"); n != 1 {
				t.Errorf("%d orders of order-2, want the 1 the stuck request placed", n)
			}
			wantError(t, cmd("settle", "-single-client", "-key", "order-2", "-status", "201"), exitFinished,
				`idem: key "order-2" of the single client has finished: retries get its stored response (idem inspect shows it), and there is nothing to settle`)
		})

		t.Run("Release", func(t *testing.T) {
			send(t, "/orders/stuck-no-effect", "order-3", http.StatusInternalServerError, "")
			notFound(t, cmd("release", "-key", "order-3", "-no-effect"), "release", `"order-3"`)
			cmd("release", "-single-client", "-key", "order-3", "-no-effect").wantCode(t, exitOK)
			if _, err := store.Lookup(context.Background(), tb.db, idemhttp.StoredKey("", "order-3")); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Lookup after release -single-client: %v, want ErrNotFound", err)
			}
		})

		t.Run("Forget", func(t *testing.T) {
			send(t, "/orders", "order-4", http.StatusCreated, "placed order-4")
			notFound(t, cmd("forget", "-key", "order-4"), "forget", `"order-4"`)
			cmd("forget", "-single-client", "-key", "order-4").wantCode(t, exitOK)
			send(t, "/orders", "order-4", http.StatusCreated, "placed order-4")
			if n := svc.fx.Count(t, "order-4"); n != 2 {
				t.Errorf("%d orders of order-4, want 2: the request after forget runs as a new one", n)
			}
			notFound(t, cmd("forget", "-key", "never-sent", "-single-client"), "forget", `"never-sent" of the single client`)
		})
	})
}
