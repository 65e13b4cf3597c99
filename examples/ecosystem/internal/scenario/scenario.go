// Package scenario drives a Store on SQLite through every outcome SQLite can
// produce and through each class of error, so that the observers' tests can
// check what they recorded against one list of calls.
package scenario

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/observe"
)

// Call is one call of the scenario and what an observer must have been told.
type Call struct {
	Name      string
	Key       string
	Outcome   string // observe.Outcome
	ErrorType string // observe.ErrorType, "" unless Outcome is "error"
	Attempts  int
}

// Calls are the calls Run makes, in order. SQLite cannot answer InFlight:
// with _txlock=immediate a second claim waits at BEGIN, and a wait that
// runs out is a busy error (ErrRetry), which the last call provokes.
var Calls = []Call{
	{"first request", "order-1", observe.OutcomeClaimed, "", 1},
	{"retry", "order-1", observe.OutcomeReplay, "", 1},
	{"another request under the same key", "order-1", observe.OutcomeMismatch, "", 1},
	{"response over the limit", "order-2", observe.OutcomeError, observe.ErrorTooLarge, 1},
	{"the work fails", "order-3", observe.OutcomeError, observe.ErrorOther, 1},
	{"database stays locked", "order-4", observe.OutcomeError, observe.ErrorRetry, 5},
}

// Scope is the client whose calls Run makes, as idemhttp and idemgrpc
// name a client (idem.WithScope).
const Scope = "acct_42"

// Count returns how many calls of Calls match keep.
func Count(keep func(Call) bool) int {
	n := 0
	for _, c := range Calls {
		if keep(c) {
			n++
		}
	}
	return n
}

// Run makes the calls of Calls with store on db, an observed Store made for
// a database of testdb, and fails t if a call does not end as listed.
func Run(t *testing.T, db *testdb.DB, store *idem.Store) {
	t.Helper()
	ctx := idem.WithScope(t.Context(), Scope)
	order := func(item string) idem.Func {
		return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (item) VALUES (?)`, item); err != nil {
				return idem.Response{}, err
			}
			return idem.Response{Status: 201, Body: []byte(`{"item":"` + item + `"}`)}, nil
		}
	}
	book, pen := idem.Fingerprint([]byte("book")), idem.Fingerprint([]byte("pen"))

	check := func(c Call, res idem.Result, err error) {
		t.Helper()
		if got := observe.Outcome(idem.Event{Outcome: res.Outcome, Err: err}); got != c.Outcome || observe.ErrorType(err) != c.ErrorType {
			t.Fatalf("%s: got %v, %v; want %s %s", c.Name, res.Outcome, err, c.Outcome, c.ErrorType)
		}
	}
	res, err := store.DoTx(ctx, db.DB, nil, Calls[0].Key, book, order("book"))
	check(Calls[0], res, err)
	res, err = store.DoTx(ctx, db.DB, nil, Calls[1].Key, book, order("book"))
	check(Calls[1], res, err)
	res, err = store.DoTx(ctx, db.DB, nil, Calls[2].Key, pen, order("pen"))
	check(Calls[2], res, err)

	// Do rather than DoTx, so that the observer sees both.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = store.Do(ctx, tx, Calls[3].Key, book, func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{Status: 200, Body: []byte(strings.Repeat("x", idem.DefaultMaxResponseBytes+1))}, nil
	})
	check(Calls[3], res, err)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	res, err = store.DoTx(ctx, db.DB, nil, Calls[4].Key, book, func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{}, errors.New("card declined")
	})
	check(Calls[4], res, err)

	// A handle that waits 10 ms for the write lock, while another holds
	// it: every attempt of DoTx finds the database busy.
	impatient, err := sql.Open("sqlite", testdb.DSN(db.Path, 10))
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = store.DoTx(ctx, impatient, nil, Calls[5].Key, book, order("book"))
	check(Calls[5], res, err)
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}

	if n := db.CountT(t, "orders"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}
