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
// transaction again (TestRefusableAfterDeadlock).
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

// savepointError is the error of Refusable's RELEASE or ROLLBACK TO, which
// Do, knowing the dialect, may read as the end of the transaction (see
// savepointGone).
type savepointError struct {
	op  string // what the statement was for
	err error
}

func (e *savepointError) Error() string { return "idem: " + e.op + ": " + e.err.Error() }
func (e *savepointError) Unwrap() error { return e.err }

// savepointLoser is a built-in dialect whose server may roll back a whole
// transaction under fn, taking Refusable's savepoint with it.
type savepointLoser interface {
	// savepointGone reports whether err, of a statement on Refusable's
	// savepoint, which was set, says that it no longer exists.
	savepointGone(err error) bool
}

// transactionGone returns ErrRetry when err is Refusable's, on a savepoint
// that the server dropped with the whole transaction: the claim is gone,
// and nothing that fn did is left to store. It returns nil for any other
// error.
func (s *Store) transactionGone(err error) error {
	var sp *savepointError
	if !errors.As(err, &sp) {
		return nil
	}
	if g, ok := s.d.(savepointLoser); !ok || !g.savepointGone(sp.err) {
		return nil
	}
	return fmt.Errorf("idem: %s: %w: the server ended the transaction in the Func, and its claim of the key is gone; nothing was stored: %w", sp.op, ErrRetry, sp.err)
}
