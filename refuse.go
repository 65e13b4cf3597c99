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
				_, err = tx.ExecContext(ctx, "RELEASE SAVEPOINT "+refusableSavepoint)
			}
			return resp, err
		}
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+refusableSavepoint); err != nil {
			return Response{}, fmt.Errorf("idem: undo refused request: %w", err)
		}
		return r.resp, nil
	}
}
