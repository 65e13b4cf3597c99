package idempgx_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// orders is a handler that writes its effect in the middleware's pgx
// transaction and answers 201 with the order's number.
func orders(e *env) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := idempgx.Tx(r.Context())
		if tx == nil {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		var n int64
		err := tx.QueryRow(r.Context(), e.Effects.InsertSQL()+" RETURNING length(note)", dbtest.EffectKey(key), "order").Scan(&n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order for %s", key)
	})
}

// TestMiddleware sends many requests, several at once with each key, to
// idemhttp's middleware on a pgx pool: every key gets one effect, and every
// client that got a 201 got the same body as the others with its key.
func TestMiddleware(t *testing.T) {
	e := setup(t, 8)
	m, err := idempgx.NewMiddleware(e.Store, e.pool, pgx.TxOptions{}, idemhttp.WithSingleClient())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(orders(e)))
	defer srv.Close()

	const keys, copies = 40, 4
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		bodies = map[string]map[string]int{} // by key, then body
	)
	for k := range keys {
		key := fmt.Sprintf("order-%d", k)
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					status, body := post(t, srv.URL, key)
					if status == http.StatusConflict {
						time.Sleep(2 * time.Millisecond) // in flight: the client sends it again
						continue
					}
					if status != http.StatusCreated {
						t.Errorf("%s: %d %s", key, status, body)
						return
					}
					mu.Lock()
					if bodies[key] == nil {
						bodies[key] = map[string]int{}
					}
					bodies[key][body]++
					mu.Unlock()
					return
				}
			}()
		}
	}
	wg.Wait()
	for k := range keys {
		key := fmt.Sprintf("order-%d", k)
		if n := e.EffectCount(t, key); n != 1 {
			t.Errorf("%s: %d effects, want 1", key, n)
		}
		if len(bodies[key]) != 1 || bodies[key]["order for "+key] != copies {
			t.Errorf("%s: bodies %v, want %d times %q", key, bodies[key], copies, "order for "+key)
		}
	}
}

func post(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"item":1}`))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
