package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemgo/idem/idemhttp"
)

// The HTTP paths send a request through a middleware in process, with
// httptest's request and recorder and no network: "http" through idemhttp
// in its default configuration (New with WithSingleClient, nothing else),
// "lease" through the lease middleware of lease.go. Both wrap the same
// order handler.

// orderJSON is the body of every request the HTTP paths send.
const orderJSON = `{"item":42,"qty":1}`

// orderHandler is the service's handler: it decodes the order, inserts it
// in the transaction the middleware gives it (see idemhttp.Tx), and answers
// 201 with a JSON body, as response does.
func (b *bench) orderHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := idemhttp.Tx(r.Context())
		if tx == nil {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		var o struct{ Item, Qty int64 }
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			http.Error(w, "bad order: "+err.Error(), http.StatusBadRequest)
			return
		}
		key := []byte(r.Header.Get("Idempotency-Key"))
		if _, err := tx.ExecContext(r.Context(), b.insert, key, o.Item, o.Qty); err != nil {
			http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(response.Body)
	})
}

// post sends the order with key through h and checks that it was created,
// or, with replay, that it was answered from the stored response.
func post(ctx context.Context, h http.Handler, key string, replay bool) error {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(orderJSON))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		body, _ := io.ReadAll(io.LimitReader(rec.Body, 300))
		return fmt.Errorf("status %d: %s", rec.Code, strings.TrimSpace(string(body)))
	}
	if got := rec.Header().Get(idemhttp.ReplayedHeader) == "true"; got != replay {
		return fmt.Errorf("replayed %v, want %v", got, replay)
	}
	return nil
}
