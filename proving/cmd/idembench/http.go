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
// order handler, which native.go also puts behind idempgx's middleware and
// the lease middleware on pgx.

// orderJSON is the body of every request the HTTP paths send.
const orderJSON = `{"item":42,"qty":1}`

// orderHandler is the service's handler: it decodes the order, inserts it
// in the transaction the middleware gives it (see idemhttp.Tx), and answers
// 201 with a JSON body, as response does.
func (b *bench) orderHandler() http.Handler {
	return b.orderHandlerOn(func(ctx context.Context, query string, args ...any) (bool, error) {
		tx := idemhttp.Tx(ctx)
		if tx == nil {
			return false, nil
		}
		_, err := tx.ExecContext(ctx, query, args...)
		return true, err
	})
}

// txExec runs a statement in the transaction that the middleware put in
// ctx; ok is false when there is none.
type txExec func(ctx context.Context, query string, args ...any) (ok bool, err error)

// orderHandlerOn is the order handler on whichever driver exec sends its
// INSERT through, so that the middlewares on database/sql and on pgx
// (native.go) wrap the same handler.
func (b *bench) orderHandlerOn(exec txExec) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var o struct{ Item, Qty int64 }
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			http.Error(w, "bad order: "+err.Error(), http.StatusBadRequest)
			return
		}
		key := []byte(r.Header.Get("Idempotency-Key"))
		ok, err := exec(r.Context(), b.insert, key, o.Item, o.Qty)
		switch {
		case !ok:
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		case err != nil:
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
