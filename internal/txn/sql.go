package txn

import (
	"context"
	"database/sql"
)

// SQL is a *sql.Tx as a Tx. It holds one pointer, so that making a Tx of it
// does not allocate.
type SQL struct{ Tx *sql.Tx }

var _ Tx = SQL{}

func (t SQL) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	r, err := t.Tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (t SQL) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return t.Tx.QueryRowContext(ctx, query, args...).Scan(dest...)
}
