package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/idemgo/idem"
)

const demoHelp = `Usage: idem demo [-dsn DSN -dialect DIALECT] [-table NAME] [-orders NAME]

Demo runs a tiny order service whose one endpoint is protected by an
idempotency key, and plays three stories against it:

  - a client whose responses get lost on the way back retries, twice;
  - 8 copies of one request, with one key, arrive at the same moment;
  - a buggy client reuses a key for a different order.

It prints what each request got, and what it means, then checks the
database: every key must have exactly one order. If one does not, demo says
which and exits with status 1.

By default it runs on a SQLite file in a new temporary directory, deleted at
the end. With -dsn it runs on that database (PostgreSQL, MySQL, MariaDB or SQLite)
in tables of its own, -table and -orders, which it creates if needed and
leaves in place; each run uses fresh keys, so it can run again. Demo never
reads IDEM_DSN, so that it cannot write to a database you did not name.

Exit status:
  0  every key has exactly one order
  1  a key has none or more than one, or an error: the database
     unreachable
  2  bad command line

Example:
  go run ./cmd/idem demo
  idem demo -dsn 'postgres://me@localhost/scratch?sslmode=disable'
`

// Default tables of the demo, apart from the default table of keys so that
// the demo never mixes its keys with a service's.
const (
	demoKeysTable   = "idem_demo_keys"
	demoOrdersTable = "idem_demo_orders"
)

// demoCopies is how many copies of one request race in the demo.
const demoCopies = 8

// demoWork is how long placing an order takes, so that the racing copies
// really meet: all arrive while the first still holds the key.
const demoWork = 20 * time.Millisecond

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, demoKeysTable)
	orders := fs.String("orders", demoOrdersTable, "table of the demo's orders")
	rest, err := parseFlags(e, fs, demoHelp, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("demo takes no arguments, got %q", rest)
	}
	// The demo reads no environment: IDEM_DSN may well name production.
	quiet := *e
	quiet.getenv = func(string) string { return "" }
	temp := ""
	if f.dsn == "" {
		if f.dialect != "" {
			k, ok := lookupDialect(f.dialect)
			if !ok {
				return usageError("unknown dialect %q: want %s", f.dialect, dialectNames())
			}
			if k.name != demoDialect {
				return usageError("-dialect %s needs -dsn: without one, the demo runs on a temporary SQLite file", f.dialect)
			}
		}
		dir, err := os.MkdirTemp("", "idem-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		temp = filepath.Join(dir, "demo.db")
		f.dsn, f.dialect = "file:"+temp, demoDialect
	}
	d, err := f.resolve(&quiet, true)
	if err != nil {
		return err
	}
	if _, err := idem.New(d.dialect, idem.WithTable(*orders)); err != nil {
		return usageError("bad -orders: %s", strings.TrimPrefix(err.Error(), "idem: "))
	}
	if *orders == d.table {
		return usageError("-orders and -table name the same table, %s", d.table)
	}
	store, err := d.store()
	if err != nil {
		return err
	}
	db, err := d.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	s := newShop(d, db, store, *orders)
	if err := store.Migrate(ctx, db); err != nil {
		return err
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}

	w := e.stdout
	// Only a database file is named: a server's DSN may carry a password.
	switch {
	case temp != "":
		fmt.Fprintf(w, "idem demo on %s, in %s (deleted at the end)\n", d.kind.title, temp)
	case d.file() != "":
		fmt.Fprintf(w, "idem demo on %s, in %s\n", d.kind.title, d.file())
	default:
		fmt.Fprintf(w, "idem demo on %s\n", d.dialect.Name())
	}
	fmt.Fprintf(w, "keys in table %s, orders in table %s\n\n", d.table, *orders)

	run, err := randomHex(3)
	if err != nil {
		return err
	}
	lost, race := "order-"+run+"-a", "order-"+run+"-b"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REQUEST\tKEY\tOUTCOME\tSTATUS\tWHAT IT MEANS")
	err = s.lostResponses(ctx, tw, lost)
	if err == nil {
		err = s.duplicates(ctx, tw, race)
	}
	if err == nil {
		err = s.reuse(ctx, tw, lost)
	}
	// The rows so far are shown even when a request failed.
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := s.check(ctx, w, []string{lost, race}); err != nil {
		return err
	}
	if temp == "" {
		dsn := "DSN"
		if d.kind.file != nil {
			dsn = f.dsn
		}
		fmt.Fprintf(w, "\nThe tables stay; run the demo again for fresh keys. To look at a key:\n  idem inspect -dsn %s -table %s -key %s\n", dsn, d.table, lost)
	}
	return nil
}

// demoDialect is the dialect of the demo's temporary database.
const demoDialect = "sqlite"

// shop is the demo's order service.
type shop struct {
	db      *sql.DB
	store   *idem.Store
	dialect idem.Dialect
	sql     demoSQL
	orders  string // quoted
	// surprises counts the answers that break idem's promises, which
	// fail the demo even if the orders come out right.
	surprises int
}

// newShop makes the order service on d's database, with its orders in the
// table orders.
func newShop(d *database, db *sql.DB, store *idem.Store, orders string) *shop {
	return &shop{db: db, store: store, dialect: d.dialect, sql: d.kind.demo, orders: d.quote(orders)}
}

func (s *shop) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(s.sql.ordersDDL, s.orders)); err != nil {
		return fmt.Errorf("create the orders table: %w", err)
	}
	return nil
}

// answer is what a client got for one request.
type answer struct {
	outcome idem.Outcome
	status  int
	order   int64 // the order the response names, 0 for none
}

// order is the handler of POST /orders: it inserts the order and claims the
// key in one transaction, and answers as an HTTP API would.
func (s *shop) order(ctx context.Context, key, item string) (answer, error) {
	hash := idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(item))
	res, err := s.store.DoTx(ctx, s.db, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		id, err := s.insertOrder(ctx, tx, key, item)
		if err != nil {
			return idem.Response{}, err
		}
		select { // the work takes a moment, while the key is held
		case <-time.After(demoWork):
		case <-ctx.Done():
			return idem.Response{}, ctx.Err()
		}
		body, err := json.Marshal(orderBody{Order: id, Item: item})
		if err != nil {
			return idem.Response{}, err
		}
		return idem.Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: body}, nil
	})
	if err != nil {
		return answer{}, fmt.Errorf("POST /orders %s with key %s: %w", item, key, err)
	}
	a := answer{outcome: res.Outcome}
	switch res.Outcome {
	case idem.Claimed, idem.Replay:
		a.status = res.Response.Status
		var b orderBody
		if err := json.Unmarshal(res.Response.Body, &b); err != nil {
			return answer{}, fmt.Errorf("response to %s: %w", key, err)
		}
		a.order = b.Order
	case idem.Mismatch:
		a.status = 422
	default:
		a.status = 409
	}
	return a, nil
}

// insertOrder adds an order, and returns its id.
func (s *shop) insertOrder(ctx context.Context, tx *sql.Tx, key, item string) (int64, error) {
	q := `INSERT INTO ` + s.orders + ` (idem_key, item) VALUES (` + s.dialect.Placeholder(1) + `, ` + s.dialect.Placeholder(2) + `)`
	if s.sql.lastInsertID {
		res, err := tx.ExecContext(ctx, q, key, item)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	var id int64
	err := tx.QueryRowContext(ctx, q+` RETURNING id`, key, item).Scan(&id)
	return id, err
}

type orderBody struct {
	Order int64  `json:"order"`
	Item  string `json:"item"`
}

func row(w io.Writer, request, key, outcome string, status int, meaning string) {
	fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", request, key, outcome, status, meaning)
}

// lostResponses: the client never hears the first two answers, and retries
// with the same key and the same request.
func (s *shop) lostResponses(ctx context.Context, w io.Writer, key string) error {
	for i, req := range []string{"POST /orders book", "  retry, same request", "  retry, same request"} {
		a, err := s.order(ctx, key, "book")
		if err != nil {
			return err
		}
		var meaning string
		switch {
		case a.outcome == idem.Claimed:
			meaning = fmt.Sprintf("order %d placed; the response is lost on the way back", a.order)
		case a.outcome == idem.Replay && i < 2:
			meaning = fmt.Sprintf("order %d's stored response, nothing done again; lost again", a.order)
		case a.outcome == idem.Replay:
			meaning = fmt.Sprintf("order %d's stored response: the client has its answer", a.order)
		default:
			meaning = "unexpected: a retry must replay"
			s.surprises++
		}
		row(w, req, key, a.outcome.String(), a.status, meaning)
	}
	return nil
}

// duplicates sends demoCopies copies of one request at the same moment.
func (s *shop) duplicates(ctx context.Context, w io.Writer, key string) error {
	answers := make([]answer, demoCopies)
	errs := make([]error, demoCopies)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range demoCopies {
		wg.Go(func() {
			<-start
			answers[i], errs[i] = s.order(ctx, key, "lamp")
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var order int64
	count := map[idem.Outcome]int{}
	status := map[idem.Outcome]int{}
	for _, a := range answers {
		count[a.outcome]++
		status[a.outcome] = a.status
		if a.outcome == idem.Claimed {
			order = a.order
		}
	}
	request := fmt.Sprintf("%d x POST /orders lamp, at once", demoCopies)
	for _, o := range []idem.Outcome{idem.Claimed, idem.Replay, idem.InFlight, idem.Mismatch} {
		n := count[o]
		if n == 0 {
			continue
		}
		var meaning string
		switch o {
		case idem.Claimed:
			meaning = fmt.Sprintf("one copy placed order %d", order)
			if n > 1 {
				meaning = "unexpected: more than one copy ran"
				s.surprises++
			}
		case idem.Replay:
			meaning = "the others waited for it, then got its response"
		case idem.InFlight:
			meaning = "still running when they stopped waiting: retry later"
		default:
			meaning = "unexpected: the copies are the same request"
			s.surprises++
		}
		row(w, request, key, fmt.Sprintf("%s x%d", o, n), status[o], meaning)
		request, key = "", ""
	}
	return nil
}

// reuse sends a different order with a key that is already used.
func (s *shop) reuse(ctx context.Context, w io.Writer, key string) error {
	a, err := s.order(ctx, key, "kettle")
	if err != nil {
		return err
	}
	meaning := "the key belongs to the book order: refused, nothing done"
	if a.outcome != idem.Mismatch {
		meaning = "unexpected: a reused key must be refused"
		s.surprises++
	}
	row(w, "POST /orders kettle, same key", key, a.outcome.String(), a.status, meaning)
	return nil
}

// check counts the orders of each key, which must be exactly one, and the
// one whose number the key's stored response carries.
func (s *shop) check(ctx context.Context, w io.Writer, keys []string) error {
	fmt.Fprintln(w, "Checking the database: one order per key")
	bad := 0
	for _, key := range keys {
		rows, err := s.db.QueryContext(ctx, `SELECT id FROM `+s.orders+` WHERE idem_key = `+s.dialect.Placeholder(1), key)
		if err != nil {
			return fmt.Errorf("count the orders of %s: %w", key, err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		stored := int64(0)
		res, err := s.store.Lookup(ctx, s.db, key)
		if err != nil {
			return fmt.Errorf("look up %s: %w", key, err)
		}
		var b orderBody
		if json.Unmarshal(res.Response.Body, &b) == nil {
			stored = b.Order
		}
		switch {
		case len(ids) != 1:
			bad++
			fmt.Fprintf(w, "  %s  %d orders %v: WRONG, want exactly one\n", key, len(ids), ids)
		case ids[0] != stored:
			bad++
			fmt.Fprintf(w, "  %s  order %d, but its stored response names order %d: WRONG\n", key, ids[0], stored)
		default:
			fmt.Fprintf(w, "  %s  1 order, order %d, as its stored response says: ok\n", key, ids[0])
		}
	}
	if bad > 0 {
		return fmt.Errorf("the check failed: %d of %d keys do not have exactly the one order their response names", bad, len(keys))
	}
	if s.surprises > 0 {
		return fmt.Errorf("the check failed: %d answers were not what idem promises (see the table)", s.surprises)
	}
	fmt.Fprintln(w, "Every key has exactly one order: the retries and the duplicates did no harm.")
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
