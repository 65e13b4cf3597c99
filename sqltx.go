package idem

import (
	"context"
	"database/sql"

	"github.com/idemgo/idem/internal/txn"
)

// sqlTx is a *sql.Tx as a Store's engine sends statements through it. It
// holds one pointer, so that making a txn.Tx of it does not allocate.
type sqlTx struct{ tx *sql.Tx }

var _ txn.Tx = sqlTx{}

func (t sqlTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	r, err := t.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (t sqlTx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return t.tx.QueryRowContext(ctx, query, args...).Scan(dest...)
}
