package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Refuse ends a Func wrapped in Refusable with a final response, such as a
// declined payment, whose database writes are undone while the response is
// still stored and replayed to retries. Returned from a Func that is not
// wrapped in Refusable, it is an ordinary error and nothing is stored.
func Refuse(r Response) error { return &refusal{resp: r} }

type refusal struct{ resp Response }

func (r *refusal) Error() string {
	return fmt.Sprintf("idem: request refused with status %d", r.resp.Status)
}

// refusableSavepoint names the savepoint of Refusable. SAVEPOINT, ROLLBACK TO
// SAVEPOINT and RELEASE SAVEPOINT are spelt the same by PostgreSQL, MySQL and
// SQLite.
const refusableSavepoint = "idem_refusable"

// Refusable wraps fn so that it may end with Refuse. It sets a savepoint
// before fn runs; when fn returns Refuse(resp), it rolls back to the
// savepoint, undoing fn's writes (and, on PostgreSQL, recovering from a
// failed statement), and returns resp to Do, which stores it as Claimed. It
// costs two statements per call, so only wrap the functions that refuse.
//
// MySQL and MariaDB roll back the whole transaction of a deadlock victim,
// and the savepoint with it: when fn then refuses, or answers as if nothing
// had happened, the savepoint's ROLLBACK TO or RELEASE finds no savepoint
// (1305). The claim went with the transaction, so Do answers ErrRetry, as it
// does when its own completion finds the claim gone, and DoTx runs the
// transaction again (TestRefusableAfterDeadlock). Do tells a savepoint that
// went with the transaction from any other failure by the claim: a guarded
// statement finds it gone.
func Refusable(fn Func) Func {
	return func(ctx context.Context, tx *sql.Tx) (Response, error) {
		if fn == nil {
			return Response{}, fmt.Errorf("%w: nil Func", ErrInvalidArgument)
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT "+refusableSavepoint); err != nil {
			return Response{}, fmt.Errorf("idem: savepoint: %w", err)
		}
		resp, err := fn(ctx, tx)
		var r *refusal
		if !errors.As(err, &r) {
			if err == nil {
				if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+refusableSavepoint); err != nil {
					return Response{}, &savepointError{op: "release savepoint", err: err}
				}
			}
			return resp, err
		}
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+refusableSavepoint); err != nil {
			return Response{}, &savepointError{op: "undo refused request", err: err}
		}
		return r.resp, nil
	}
}

// savepointError is the error of Refusable's RELEASE or ROLLBACK TO. Its
// savepoint was set, so it is gone only when the transaction ended under
// fn: the server rolled it back for a deadlock or a snapshot conflict (as
// MySQL and MariaDB do with a deadlock victim, and SQLite with an
// interrupted statement), or, against the rules of a Func, fn ended it. The
// guarded Abandon that follows tells which (see abandonClaim).
type savepointError struct {
	op  string // what the statement was for
	err error
}

func (e *savepointError) Error() string { return "idem: " + e.op + ": " + e.err.Error() }
func (e *savepointError) Unwrap() error { return e.err }
