package idempgx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// funcTx is the transaction as DoTx's Func gets it, pgx's own, and every
// savepoint derived from it, at any depth: each refuses statements once DoTx
// has ended the transaction. DoTx commits with a COMMIT of its own, sent in
// one batch with the completion, which pgx's transaction does not see; pgx's
// savepoints send their statements through that transaction. Without this
// guard, a Func that kept tx or a savepoint of it past its return would send
// statements on a connection that is back in the pool, in autocommit or in
// another request's transaction.
//
// While DoTx runs, each method is pgx's: Begin sets a savepoint, and on a
// savepoint Commit releases it and Rollback rolls back to it. LargeObjects
// and Conn are pgx's, unguarded: neither can be wrapped, since pgx's
// LargeObjects holds pgx's own transaction and Conn is the connection
// itself, so what a Func does through them after DoTx's return reaches the
// pooled connection.
type funcTx struct {
	pgx.Tx
	o *ownedTx
}

var _ pgx.Tx = funcTx{}

// Begin sets a savepoint, which is guarded as f is: pgx's own savepoint
// would send its statements through pgx's transaction, which does not
// know that DoTx ended it.
func (f funcTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if f.o.ended {
		return nil, errTxClosed
	}
	sp, err := f.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return funcTx{Tx: sp, o: f.o}, nil
}

func (f funcTx) Commit(ctx context.Context) error {
	if f.o.ended {
		return errTxClosed
	}
	return f.Tx.Commit(ctx)
}

func (f funcTx) Rollback(ctx context.Context) error {
	if f.o.ended {
		return errTxClosed
	}
	return f.Tx.Rollback(ctx)
}

func (f funcTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if f.o.ended {
		return 0, errTxClosed
	}
	return f.Tx.CopyFrom(ctx, table, columns, src)
}

func (f funcTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if f.o.ended {
		return pgx.FailedBatchResults(b, errTxClosed)
	}
	return f.Tx.SendBatch(ctx, b)
}

func (f funcTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if f.o.ended {
		return nil, errTxClosed
	}
	return f.Tx.Prepare(ctx, name, sql)
}

func (f funcTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if f.o.ended {
		return pgconn.CommandTag{}, errTxClosed
	}
	return f.Tx.Exec(ctx, sql, args...)
}

func (f funcTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if f.o.ended {
		return closedRows{}, errTxClosed
	}
	return f.Tx.Query(ctx, sql, args...)
}

func (f funcTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if f.o.ended {
		return closedRows{}
	}
	return f.Tx.QueryRow(ctx, sql, args...)
}

// closedRows are the rows of a statement sent on a transaction that had
// ended: none, and errTxClosed.
type closedRows struct{}

func (closedRows) Close()                                       {}
func (closedRows) Err() error                                   { return errTxClosed }
func (closedRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (closedRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (closedRows) Next() bool                                   { return false }
func (closedRows) Scan(...any) error                            { return errTxClosed }
func (closedRows) Values() ([]any, error)                       { return nil, errTxClosed }
func (closedRows) RawValues() [][]byte                          { return nil }
func (closedRows) Conn() *pgx.Conn                              { return nil }
func (closedRows) TypeMap() *pgtype.Map                         { return closedTypes }

// closedTypes is the type map of closedRows, which decode nothing.
var closedTypes = pgtype.NewMap()
