// Command browser serves a payment page and, on another origin, the
// payment API that it calls with fetch: idemhttp on SQLite behind a CORS
// middleware. The page keeps one Idempotency-Key per payment, across
// retries and reloads, so that a lost answer never pays twice.
//
//	go run ./examples/browser    # page on http://127.0.0.1:8081, API on http://127.0.0.1:8080
//
// The README next to this file says what to try.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	_ "modernc.org/sqlite"
)

func main() {
	apiAddr := flag.String("api", "127.0.0.1:8080", "address of the API")
	pageAddr := flag.String("page", "127.0.0.1:8081", "address of the page: another origin than the API's")
	path := flag.String("db", "", "SQLite database file (default: a new file in a temporary directory)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *apiAddr, *pageAddr, *path); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, apiAddr, pageAddr, path string) error {
	if path == "" {
		dir, err := os.MkdirTemp("", "idem-browser")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "payments.db")
	}
	db, err := openDB(path)
	if err != nil {
		return err
	}
	defer db.Close()
	// crypto.randomUUID needs a secure context, which http://127.0.0.1
	// and http://localhost are.
	api, err := newAPI(ctx, db, "http://"+pageAddr)
	if err != nil {
		return err
	}
	servers := []*http.Server{
		{Addr: apiAddr, Handler: api, ReadHeaderTimeout: 10 * time.Second},
		{Addr: pageAddr, Handler: newPage("http://" + apiAddr), ReadHeaderTimeout: 10 * time.Second},
	}
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		go func() {
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				errs <- err
				return
			}
			errs <- nil
		}()
	}
	log.Printf("the page is on http://%s, the API on http://%s, the database in %s", pageAddr, apiAddr, path)
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdown)
	}
	return first
}
