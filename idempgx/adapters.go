package idempgx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/driver"
)

// errTxClosed is the error of a statement sent on a transaction that has
// ended. It matches pgx.ErrTxClosed, as pgx's own transactions answer, and
// sql.ErrTxDone, which is how idem tells that a Func ended its transaction.
var errTxClosed = fmt.Errorf("%w (%w)", pgx.ErrTxClosed, sql.ErrTxDone)

// closedErr makes an error of a closed pgx transaction match sql.ErrTxDone.
func closedErr(err error) error {
	if errors.Is(err, pgx.ErrTxClosed) && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w (%w)", err, sql.ErrTxDone)
	}
	return err
}

// callerTx is the caller's pgx transaction, as Do sends its statements
// through it.
type callerTx struct{ tx pgx.Tx }

func (c callerTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, closedErr(err)
	}
	return tag.RowsAffected(), nil
}

func (c callerTx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return closedErr(c.tx.QueryRow(ctx, query, args...).Scan(dest...))
}

func (c callerTx) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	rows, err := c.tx.Query(ctx, query, args...)
	return closedErr(eachRow(rows, err, row))
}

// eachRow calls row for each of rows, the answer of a query that failed
// with err or not, and closes them.
func eachRow(rows pgx.Rows, err error, row func(scan func(dest ...any) error) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// pooled is db as the database of an operation, whose transactions begin
// with opts: nil for a nil db, which the operation refuses.
func pooled(db *pgxpool.Pool, opts pgx.TxOptions) driver.DB[pgx.Tx] {
	if db == nil {
		return nil
	}
	return poolDB{pool: db, opts: opts}
}

// callerIn is tx, the caller's, as the transaction of Do: nil for a nil tx,
// which Do refuses.
func callerIn(tx pgx.Tx) driver.Tx {
	if tx == nil {
		return nil
	}
	return callerTx{tx}
}

// poolDB is a pgx pool as DoTx begins its transactions on it, with opts.
type poolDB struct {
	pool *pgxpool.Pool
	opts pgx.TxOptions
}

func (d poolDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := d.pool.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (d poolDB) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return d.pool.QueryRow(ctx, query, args...).Scan(dest...)
}

func (d poolDB) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	rows, err := d.pool.Query(ctx, query, args...)
	return eachRow(rows, err, row)
}

// Begin sends BEGIN and first in one batch, which pgx pipelines: one round
// trip. Their answers are read later, in order, through the rows; the
// transaction reads what is left of them before it sends anything else.
func (d poolDB) Begin(ctx context.Context, first ...driver.Statement) (driver.Owned[pgx.Tx], []driver.Row, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	b.BeginTx(d.opts)
	for _, q := range first {
		b.Queue(q.SQL, q.Args...)
	}
	results := c.Conn().SendBatch(ctx, b)
	if _, err := results.Exec(); err != nil {
		_ = results.Close()
		c.Release() // the pool closes a connection left in a transaction
		return nil, nil, err
	}
	o := &ownedTx{tx: results.Tx(), pending: results, conn: c, commitSQL: d.opts.CommitQuery}
	rows := make([]driver.Row, len(first))
	for i := range rows {
		rows[i] = batchRow{o}
	}
	return o, rows, nil
}

// batchRow is the answer of the next statement of a transaction's first
// batch.
type batchRow struct{ o *ownedTx }

func (r batchRow) Scan(dest ...any) error {
	if r.o.pending == nil {
		return errors.New("idempgx: the answers of the BEGIN's batch were read past their end")
	}
	return r.o.pending.QueryRow().Scan(dest...)
}

// ownedTx is the transaction DoTx began, as idem's engine sends its
// statements through it; its Func gets tx. It holds the connection until the
// transaction ends.
type ownedTx struct {
	tx pgx.Tx
	// pending holds the answers of the BEGIN's batch until they are read.
	pending   pgx.BatchResults
	conn      *pgxpool.Conn
	commitSQL string // pgx.TxOptions.CommitQuery, or "" for COMMIT
	ended     bool   // the connection went back to the pool
}

// ready reads what is left of the BEGIN's batch, which pgx requires before
// the transaction sends anything else.
func (o *ownedTx) ready() error {
	if o.pending == nil {
		return nil
	}
	err := o.pending.Close()
	o.pending = nil
	return err
}

// release gives the connection back to the pool, once; the pool closes a
// connection that is not idle.
func (o *ownedTx) release() {
	_ = o.ready()
	o.ended = true
	if o.conn != nil {
		o.conn.Release()
		o.conn = nil
	}
}

func (o *ownedTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := o.ready(); err != nil {
		return 0, err
	}
	return callerTx{o.tx}.Exec(ctx, query, args...)
}

func (o *ownedTx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	if err := o.ready(); err != nil {
		return err
	}
	return callerTx{o.tx}.QueryRow(ctx, query, args, dest...)
}

func (o *ownedTx) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	if err := o.ready(); err != nil {
		return err
	}
	return callerTx{o.tx}.Query(ctx, query, args, row)
}

// Native is the transaction that the Func gets: pgx's, guarded so that it
// and its savepoints refuse every call once DoTx has ended it. It reads
// what is left of the BEGIN's batch first, which pgx requires before the
// transaction sends anything else: an answer left unread there is one the
// Store did not need, and its error, if any, changes nothing.
func (o *ownedTx) Native() pgx.Tx {
	_ = o.ready()
	return funcTx{Tx: o.tx, o: o}
}

// CommitAfter sends the completion q and COMMIT in one batch. The
// completion runs inside a statement that divides by the number of rows it
// changed: with no row it fails, the server skips the COMMIT queued after
// it, and the transaction is rolled back.
func (o *ownedTx) CommitAfter(ctx context.Context, q driver.Statement) error {
	defer o.release()
	if err := o.ready(); err != nil {
		return err
	}
	if o.conn.Conn().PgConn().TxStatus() == 'I' {
		return errTxClosed // fn committed or rolled back
	}
	b := &pgx.Batch{}
	b.Queue("WITH done AS ("+q.SQL+" RETURNING 1) SELECT 1 / count(*) FROM done", q.Args...)
	commit := o.commitSQL
	if commit == "" {
		commit = "COMMIT"
	}
	b.Queue(commit)
	results := o.tx.SendBatch(ctx, b)
	var one int
	if err := results.QueryRow().Scan(&one); err != nil {
		_ = results.Close()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			return &driver.CommitError{Err: closedErr(err)} // the COMMIT may have run
		}
		_ = o.tx.Rollback(context.WithoutCancel(ctx))
		if pgErr.Code == pgDivisionByZero {
			return driver.ErrNoRow
		}
		return err
	}
	tag, err := results.Exec()
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return &driver.CommitError{Err: err}
	case tag.String() == "ROLLBACK":
		return &driver.CommitError{Err: pgx.ErrTxCommitRollback}
	}
	return nil
}

// Commit commits the transaction, with the commit query of its options.
func (o *ownedTx) Commit(ctx context.Context) error {
	defer o.release()
	if err := o.ready(); err != nil {
		return err
	}
	commit := o.commitSQL
	if commit == "" {
		commit = "COMMIT"
	}
	tag, err := o.tx.Exec(ctx, commit)
	switch {
	case err != nil:
		return closedErr(err)
	case tag.String() == "ROLLBACK":
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// pgDivisionByZero is the SQLSTATE of a completion that changed no row.
const pgDivisionByZero = "22012"

// Rollback rolls the transaction back; pgx's transaction answers
// pgx.ErrTxClosed, without sending anything, when the Func committed or
// rolled it back, and the error then matches sql.ErrTxDone too.
func (o *ownedTx) Rollback(ctx context.Context) error {
	defer o.release()
	_ = o.ready()
	return closedErr(o.tx.Rollback(ctx))
}
