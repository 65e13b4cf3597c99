package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
)

// paymentsSchema is the activity's effect. The execution's ids tell an
// operator which activity made a payment; idem_key is deliberately not
// UNIQUE: a real effect is often more than one row (ledger, outbox), which
// no single constraint covers, and the key's record is what keeps it to one.
const paymentsSchema = `CREATE TABLE IF NOT EXISTS payments (
	id           INTEGER PRIMARY KEY,
	idem_key     TEXT NOT NULL,
	workflow_id  TEXT NOT NULL,
	run_id       TEXT NOT NULL,
	activity_id  TEXT NOT NULL,
	order_id     TEXT NOT NULL,
	customer     TEXT NOT NULL,
	amount_cents INTEGER NOT NULL
)`

// Charge is the input of the Charge activity: an amount to take from a
// customer for an order.
type Charge struct {
	OrderID     string
	Customer    string
	AmountCents int64
}

// Receipt is what the Charge activity returns: the payment, and what idem
// answered the attempt that returned it.
type Receipt struct {
	Key       string
	Outcome   string // "claimed" or "replay"
	PaymentID int64
	Attempt   int32
	// The execution's ids, as the attempt saw them.
	WorkflowID, RunID, ActivityID string
}

// Payments holds the Charge activity's database. A worker registers it
// with RegisterActivity, which registers its exported methods.
type Payments struct {
	DB    *sql.DB
	Store *idem.Store
	// AfterCommit, if set, runs after Charge's transaction committed and
	// before the activity returns to Temporal, which records its
	// completion; an error it returns is the activity's, as if the
	// completion were lost. The tests use it to kill the worker at that
	// point, or to fail the attempt; a real worker leaves it nil.
	AfterCommit func(ctx context.Context, r Receipt) error
}

// openDB opens the SQLite database as idem asks: _txlock=immediate makes
// each transaction take the write lock when it begins, and the busy timeout
// makes it wait for the lock instead of failing at once.
func openDB(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)")
}

// newStore makes the activity's Store, whose keys outlive every retry of a
// charge (see keyRetention).
func newStore(opts ...idem.Option) (*idem.Store, error) {
	return idem.New(idem.SQLite(), append([]idem.Option{idem.WithRetention(keyRetention)}, opts...)...)
}

// migrate creates idem's table and the payments table.
func migrate(ctx context.Context, db *sql.DB, store *idem.Store) error {
	if err := store.Migrate(ctx, db); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, paymentsSchema)
	return err
}

// Charge takes the payment once per activity, however often Temporal runs
// it: the payment and the record of the activity's key commit together, so
// an attempt that committed and died before Temporal heard of it is
// retried, and the retry replays the stored receipt instead of charging
// again.
func (p *Payments) Charge(ctx context.Context, c Charge) (Receipt, error) {
	info := activity.GetInfo(ctx)
	key := ActivityKey(info)
	input, err := json.Marshal(c)
	if err != nil {
		return Receipt{}, err
	}
	// The hash makes a different charge under the same key a Mismatch:
	// workflow code that changed what an activity of a running workflow
	// charges, which no retry can mend.
	hash := idem.Fingerprint([]byte("charge"), input)
	res, err := p.Store.DoTx(ctx, p.DB, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		r, err := tx.ExecContext(ctx, `INSERT INTO payments
			(idem_key, workflow_id, run_id, activity_id, order_id, customer, amount_cents)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			key, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID,
			c.OrderID, c.Customer, c.AmountCents)
		if err != nil {
			return idem.Response{}, err
		}
		id, err := r.LastInsertId()
		if err != nil {
			return idem.Response{}, err
		}
		return idem.Response{Status: 201, Body: fmt.Appendf(nil, `{"payment":%d}`, id)}, nil
	})
	if err != nil {
		// Nothing was committed: Temporal's retry runs the charge.
		return Receipt{}, fmt.Errorf("charge %s: %w", c.OrderID, err)
	}
	switch res.Outcome {
	case idem.Claimed, idem.Replay:
	case idem.InFlight:
		// An earlier attempt, given up for dead by Temporal, still holds
		// the key in an open transaction: a later retry finds it
		// committed or rolled back.
		return Receipt{}, fmt.Errorf("charge %s: an earlier attempt still holds key %s", c.OrderID, key)
	default:
		return Receipt{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("charge %s: key %s was used for another charge", c.OrderID, key), "IdempotencyKeyMismatch", nil)
	}
	var body struct{ Payment int64 }
	if err := json.Unmarshal(res.Response.Body, &body); err != nil {
		return Receipt{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("charge %s: stored receipt %q", c.OrderID, res.Response.Body), "BadStoredReceipt", err)
	}
	rc := Receipt{
		Key:        key,
		Outcome:    res.Outcome.String(),
		PaymentID:  body.Payment,
		Attempt:    info.Attempt,
		WorkflowID: info.WorkflowExecution.ID,
		RunID:      info.WorkflowExecution.RunID,
		ActivityID: info.ActivityID,
	}
	if p.AfterCommit != nil {
		if err := p.AfterCommit(ctx, rc); err != nil {
			return Receipt{}, err
		}
	}
	return rc, nil
}
