package idem

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"

	"github.com/idemgo/idem/driver"
)

// The driver of database/sql: what the Store's own methods run on. A
// driver package for another library (idempgx, for pgx) implements the same
// interfaces for its pool.

// sqlTx is a *sql.Tx as a driver.Tx. It holds one pointer, so that making
// a driver.Tx of it does not allocate.
type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected(t.tx.ExecContext(ctx, query, args...))
}

func (t sqlTx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return t.tx.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (t sqlTx) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	rows, err := t.tx.QueryContext(ctx, query, args...)
	return eachRow(rows, err, row)
}

// sqlOn is db as the database of an operation, whose transactions begin
// with opts: nil for a nil db, which the operation refuses.
func sqlOn(db *sql.DB, opts *sql.TxOptions) driver.DB[*sql.Tx] {
	if db == nil {
		return nil
	}
	return sqlDB{db, opts}
}

// sqlIn is tx as the transaction of Do: nil for a nil tx, which Do refuses.
func sqlIn(tx *sql.Tx) driver.Tx {
	if tx == nil {
		return nil
	}
	return sqlTx{tx}
}

// sqlDB is a *sql.DB, whose transactions begin with opts.
type sqlDB struct {
	db   *sql.DB
	opts *sql.TxOptions
}

// readsUncommitted reports whether the transactions begin at READ
// UNCOMMITTED (see Store.on).
func (d sqlDB) readsUncommitted() bool {
	return d.opts != nil && d.opts.Isolation == sql.LevelReadUncommitted
}

func (d sqlDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected(d.db.ExecContext(ctx, query, args...))
}

func (d sqlDB) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return d.db.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (d sqlDB) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	rows, err := d.db.QueryContext(ctx, query, args...)
	return eachRow(rows, err, row)
}

// Begin begins the transaction; database/sql sends each statement in a
// round trip of its own, so the statements of first run when their row is
// read, and not at all when it is left unread.
func (d sqlDB) Begin(ctx context.Context, first ...driver.Statement) (driver.Owned[*sql.Tx], []driver.Row, error) {
	tx, err := d.db.BeginTx(ctx, d.opts)
	if err != nil {
		return nil, nil, err
	}
	return begun(ctx, tx, first)
}

// begun is tx, just begun, as the Store's transaction, with the rows of
// first.
func begun(ctx context.Context, tx *sql.Tx, first []driver.Statement) (driver.Owned[*sql.Tx], []driver.Row, error) {
	o := &sqlOwned{sqlTx{tx}}
	var rows []driver.Row
	for _, q := range first {
		rows = append(rows, lazyRow{ctx: ctx, tx: tx, q: q})
	}
	return o, rows, nil
}

// lazyRow runs its statement when it is read.
type lazyRow struct {
	ctx context.Context
	tx  *sql.Tx
	q   driver.Statement
}

func (r lazyRow) Scan(dest ...any) error {
	return r.tx.QueryRowContext(r.ctx, r.q.SQL, r.q.Args...).Scan(dest...)
}

// sqlOwned is a transaction that the Store began on a sqlDB.
type sqlOwned struct{ sqlTx }

func (o *sqlOwned) Native() *sql.Tx { return o.tx }

func (o *sqlOwned) CommitAfter(ctx context.Context, q driver.Statement) error {
	n, err := o.Exec(ctx, q.SQL, q.Args...)
	if err != nil || n != 1 {
		_ = o.tx.Rollback()
		if err == nil {
			err = driver.ErrNoRow
		}
		return err
	}
	if err := o.tx.Commit(); err != nil {
		return &driver.CommitError{Err: err}
	}
	return nil
}

func (o *sqlOwned) Commit(context.Context) error { return o.tx.Commit() }

func (o *sqlOwned) Rollback(context.Context) error { return o.tx.Rollback() }

func rowsAffected(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// eachRow calls row for each of rows, the answer of a query that failed
// with err or not, and closes them.
func eachRow(rows *sql.Rows, err error, row func(scan func(dest ...any) error) error) error {
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

// Pin lends one connection of the pool, for a Store whose statements change
// the session (driver.Pinner): the connection is closed at the end, never
// returned to the pool.
func (d sqlDB) Pin(ctx context.Context) (driver.DB[*sql.Tx], func() error, error) {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	return sqlConn{c: c, opts: d.opts}, func() error { return discard(c) }, nil
}

// discard closes c and the connection under it: database/sql closes a
// connection whose Raw returns driver.ErrBadConn instead of pooling it.
func discard(c *sql.Conn) error {
	_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
	if err := c.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err
	}
	return nil
}

func (d sqlDB) QueryRowCommitted(ctx context.Context, query string, args []any, dest ...any) error {
	return queryRowCommitted(ctx, d.db.BeginTx, query, args, dest)
}

// queryRowCommitted runs query in a read-only transaction at READ
// COMMITTED that begin begins, and scans its row into dest.
func queryRowCommitted(ctx context.Context, begin func(context.Context, *sql.TxOptions) (*sql.Tx, error), query string, args, dest []any) error {
	tx, err := begin(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted, ReadOnly: true})
	if err != nil {
		return err
	}
	err = tx.QueryRowContext(ctx, query, args...).Scan(dest...)
	// The transaction only read: ending it changes nothing, and an end
	// that fails takes nothing from what the read found.
	_ = tx.Rollback()
	return err
}

// sqlConn is one connection of a pool, pinned (sqlDB.Pin), whose
// transactions begin with opts.
type sqlConn struct {
	c    *sql.Conn
	opts *sql.TxOptions
}

func (d sqlConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected(d.c.ExecContext(ctx, query, args...))
}

func (d sqlConn) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return d.c.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (d sqlConn) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	rows, err := d.c.QueryContext(ctx, query, args...)
	return eachRow(rows, err, row)
}

func (d sqlConn) QueryRowCommitted(ctx context.Context, query string, args []any, dest ...any) error {
	return queryRowCommitted(ctx, d.c.BeginTx, query, args, dest)
}

// Begin begins the transaction on the pinned connection, as sqlDB.Begin
// does on the pool.
func (d sqlConn) Begin(ctx context.Context, first ...driver.Statement) (driver.Owned[*sql.Tx], []driver.Row, error) {
	tx, err := d.c.BeginTx(ctx, d.opts)
	if err != nil {
		return nil, nil, err
	}
	return begun(ctx, tx, first)
}

var _ driver.Pinner[*sql.Tx] = sqlDB{}
