package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/cors"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// openDB opens the SQLite database at path as idem asks: each transaction
// takes the write lock when it begins, and waits up to 5 s for it.
func openDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}

// newAPI creates the tables if they are missing and returns the payment
// API, POST /payments, for pages served from pageOrigin.
//
// The keys are global (WithSingleClient) only because this example has no
// accounts: its keys come from crypto.randomUUID in the page. An API with
// users puts its authentication in front of the middleware and keeps each
// account's keys apart with WithScope.
func newAPI(ctx context.Context, db *sql.DB, pageOrigin string) (http.Handler, error) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		return nil, fmt.Errorf("the store: %w", err)
	}
	if err := store.Migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("the keys' table: %w", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS payments (
		id INTEGER PRIMARY KEY, payee TEXT NOT NULL, amount_cents INTEGER NOT NULL)`); err != nil {
		return nil, fmt.Errorf("the payments' table: %w", err)
	}
	mw, err := idemhttp.New(store, db, nil, idemhttp.WithSingleClient(), idemhttp.WithKeyRequired())
	if err != nil {
		return nil, fmt.Errorf("the middleware: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(http.HandlerFunc(pay)))
	return withCORS(pageOrigin, mux), nil
}

// withCORS puts the CORS middleware in front of api, so that it answers
// the preflights and adds its headers to every response, idemhttp's
// problems and replays included. Behind idemhttp it would not do: a replay
// carries only the headers that idemhttp stores, and the browser would
// hide a replay, or a 409 with its Retry-After, from the page that needs
// it.
//
// The page sends two headers that are not CORS-safelisted (Idempotency-Key,
// and Content-Type for application/json), so the browser asks first; it
// reads two response headers that are not safelisted either, which the
// API must expose: Idempotent-Replayed, to show a replay, and Retry-After,
// to wait as long as the API asks.
func withCORS(pageOrigin string, api http.Handler) http.Handler {
	return cors.New(cors.Options{
		AllowedOrigins: []string{pageOrigin},
		AllowedMethods: []string{http.MethodPost},
		AllowedHeaders: []string{"Idempotency-Key", "Content-Type"},
		ExposedHeaders: []string{"Idempotent-Replayed", "Retry-After"},
		MaxAge:         int((10 * time.Minute).Seconds()),
	}).Handler(api)
}

// payment is the body of POST /payments, and of its answer with the id.
type payment struct {
	ID          int64  `json:"id,omitempty"`
	Payee       string `json:"payee"`
	AmountCents int64  `json:"amount_cents"`
}

// pay records the payment in idemhttp's transaction, which commits it
// together with the key's record and the answer below.
func pay(w http.ResponseWriter, r *http.Request) {
	var p payment
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || strings.TrimSpace(p.Payee) == "" || p.AmountCents <= 0 || p.ID != 0 {
		// Refused before anything is written: the refusal is stored as
		// the answer to this key, and nothing else happened.
		http.Error(w, "a payment is {\"payee\": a name, \"amount_cents\": a positive number}", http.StatusBadRequest)
		return
	}
	tx := idemhttp.Tx(r.Context())
	if err := tx.QueryRowContext(r.Context(), `INSERT INTO payments (payee, amount_cents) VALUES (?, ?) RETURNING id`,
		p.Payee, p.AmountCents).Scan(&p.ID); err != nil {
		// A 5xx is neither stored nor committed: a retry runs again.
		http.Error(w, "the payment could not be recorded; try again", http.StatusServiceUnavailable)
		return
	}
	body, err := json.Marshal(p)
	if err != nil {
		http.Error(w, "the payment could not be answered; try again", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}
