// Command httpserver is a small order API whose POST /orders is made
// idempotent by idemhttp: a client that retries an order with the same
// Idempotency-Key gets the first response back instead of a second order.
//
//	go run ./examples/httpserver                       # SQLite, in a temporary directory
//	go run ./examples/httpserver -db shop.db           # SQLite, in shop.db
//	go run ./examples/httpserver -dialect postgres -dsn 'postgres://user@localhost/shop?sslmode=disable'
//	go run ./examples/httpserver -dialect mysql -dsn 'user:password@tcp(localhost:3306)/shop'  # MySQL 8+ or MariaDB
//
// The README next to this file shows the requests to try.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	dialect := flag.String("dialect", "sqlite", "database: sqlite, postgres or mysql (MySQL 8+ or MariaDB)")
	dsn := flag.String("dsn", "", "data source name for postgres or mysql")
	path := flag.String("db", "", "SQLite database file (default: a new file in a temporary directory)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *dialect, *dsn, *path); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr, dialect, dsn, path string) error {
	if dialect == "sqlite" && path == "" {
		dir, err := os.MkdirTemp("", "idem-httpserver")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "shop.db")
	}
	db, err := open(dialect, dsn, path)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := newShop(ctx, db, dialect, "")
	if err != nil {
		return err
	}
	go s.purge(ctx, time.Hour)

	srv := &http.Server{Addr: addr, Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("serving on http://%s with %s; keys are kept for %v", addr, dialect, idem.DefaultRetention)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// open opens the database with the settings its dialect asks for.
func open(dialect, dsn, path string) (*sql.DB, error) {
	switch dialect {
	case "sqlite":
		// One writing transaction at a time: each takes the write lock
		// when it begins, and waits up to 5 s for it.
		return sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)")
	case "postgres":
		return sql.Open("pgx", dsn)
	case "mysql":
		return sql.Open("mysql", dsn)
	}
	return nil, fmt.Errorf("unknown dialect %q: want sqlite, postgres or mysql", dialect)
}

// shop serves the orders.
type shop struct {
	db     *sql.DB
	store  *idem.Store
	mw     *idemhttp.Middleware // protects POST /orders
	orders string               // the orders table
	ph     func(n int) string
	// lastInsertID: the new order's id comes from the driver, as MySQL
	// has no INSERT ... RETURNING (PostgreSQL, SQLite and MariaDB have it).
	lastInsertID bool
}

// newShop makes the store and creates the tables if they are missing. prefix
// goes before the table names, so that several shops can share a database.
func newShop(ctx context.Context, db *sql.DB, dialect, prefix string) (*shop, error) {
	var (
		d   idem.Dialect
		ddl string
	)
	switch dialect {
	case "sqlite":
		d, ddl = idem.SQLite(), `id INTEGER PRIMARY KEY, account TEXT NOT NULL, item TEXT NOT NULL, quantity INTEGER NOT NULL`
	case "postgres":
		d, ddl = idem.Postgres(), `id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account text NOT NULL, item text NOT NULL, quantity integer NOT NULL`
	case "mysql":
		d, ddl = idem.MySQL(), `id BIGINT AUTO_INCREMENT PRIMARY KEY, account VARCHAR(255) NOT NULL, item VARCHAR(255) NOT NULL, quantity INT NOT NULL`
	default:
		return nil, fmt.Errorf("unknown dialect %q", dialect)
	}
	store, err := idem.New(d, idem.WithTable(prefix+"idempotency_keys"))
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx, db); err != nil {
		return nil, err
	}
	s := &shop{db: db, store: store, orders: prefix + "orders", ph: d.Placeholder, lastInsertID: dialect == "mysql"}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.orders+` (`+ddl+`)`); err != nil {
		return nil, err
	}
	// How POST /orders is protected: its transactions take the database's
	// default options (nil), every request must carry a key, keys are kept
	// apart by account, and the errors behind the middleware's 5xx answers
	// are logged. A mistake here stops the server before it serves.
	s.mw, err = idemhttp.New(store, db, nil,
		idemhttp.WithKeyRequired(),
		idemhttp.WithScope(account),
		idemhttp.WithErrorHook(func(r *http.Request, err error) { log.Printf("%s %s: %v", r.Method, r.URL.Path, err) }),
	)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// routes protects POST /orders; GET needs no protection.
func (s *shop) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /orders", s.mw.Handler(http.HandlerFunc(s.createOrder)))
	mux.HandleFunc("GET /orders/{id}", s.getOrder)
	return mux
}

// account names the client. A real API takes it from the authenticated
// caller; this example trusts a header, to keep curl calls short.
func account(r *http.Request) (string, error) {
	a := r.Header.Get("X-Account")
	if a == "" {
		return "", errors.New("no X-Account header")
	}
	return a, nil
}

type order struct {
	ID       int64  `json:"id"`
	Account  string `json:"account"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

func (s *shop) createOrder(w http.ResponseWriter, r *http.Request) {
	var o order
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil || strings.TrimSpace(o.Item) == "" || o.Quantity < 1 {
		// A 4xx is stored too: a retry of this request is refused the same way.
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"item": "...", "quantity": n} with n >= 1`})
		return
	}
	o.Account = r.Header.Get("X-Account")
	tx := idemhttp.Tx(r.Context()) // the order commits with the key, or neither does
	insert := `INSERT INTO ` + s.orders + ` (account, item, quantity) VALUES (` + s.ph(1) + `, ` + s.ph(2) + `, ` + s.ph(3) + `)`
	var err error
	if s.lastInsertID {
		var res sql.Result
		if res, err = tx.ExecContext(r.Context(), insert, o.Account, o.Item, o.Quantity); err == nil {
			o.ID, err = res.LastInsertId()
		}
	} else {
		err = tx.QueryRowContext(r.Context(), insert+` RETURNING id`, o.Account, o.Item, o.Quantity).Scan(&o.ID)
	}
	if err != nil {
		// A 5xx is not stored, and the transaction rolls back: a retry
		// places the order then.
		log.Printf("insert order: %v", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not place the order"})
		return
	}
	w.Header().Set("Location", "/orders/"+strconv.FormatInt(o.ID, 10))
	writeJSON(w, http.StatusCreated, o)
}

func (s *shop) getOrder(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	o := order{ID: id}
	err = s.db.QueryRowContext(r.Context(),
		`SELECT account, item, quantity FROM `+s.orders+` WHERE id = `+s.ph(1), id).Scan(&o.Account, &o.Item, &o.Quantity)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		http.NotFound(w, r)
	case err != nil:
		log.Printf("get order: %v", err)
		http.Error(w, "database error", http.StatusInternalServerError)
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// purge deletes expired keys every interval until ctx is done. Expired keys
// no longer count, whether purged or not; purging keeps the table small.
func (s *shop) purge(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.store.Purge(ctx, s.db, 1000); err != nil && ctx.Err() == nil {
				log.Printf("purge: %v", err)
			}
		}
	}
}
