// Package chirouter mounts the idemhttp middleware in a
// github.com/go-chi/chi/v5 router. chi's middleware is net/http's own
// func(http.Handler) http.Handler, so the middleware plugs in as it is,
// on a route with r.With or on a group with r.Use.
package chirouter

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/idemgo/idem/examples/ecosystem/internal/shop"
	"github.com/idemgo/idem/idemhttp"
)

// Routes returns a router whose POST /orders is made idempotent by mw (see
// shop.Protect). Only that route is protected: the middleware would pass a
// GET through anyway, but a route that writes nothing has no use for it.
func Routes(mw *idemhttp.Middleware) http.Handler {
	r := chi.NewRouter()
	r.With(mw.Handler).Post("/orders", createOrder)
	return r
}

// createOrder is a plain net/http handler. It writes the order in the
// request's transaction and answers 201; the middleware commits, and only
// then sends the answer.
func createOrder(w http.ResponseWriter, r *http.Request) {
	var req struct{ Item string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Item == "" {
		// Refuse before writing anything: a 4xx is stored, with
		// whatever was written in the transaction.
		http.Error(w, "want {\"item\": \"...\"}", http.StatusBadRequest)
		return
	}
	o, err := shop.CreateOrder(r.Context(), idemhttp.Tx(r.Context()), req.Item)
	if err != nil {
		// A 5xx is not stored: the transaction rolls back, and the
		// client's retry runs the handler again.
		http.Error(w, "could not place the order", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/"+strconv.FormatInt(o.ID, 10))
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(o) // the response is in memory until the commit
}
