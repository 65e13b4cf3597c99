// Package driver is the seam between an idem Store and the library that
// carries its statements to the database: database/sql, which package idem
// serves itself, or another one, such as pgx, which package idempgx serves.
// Every operation of a Store (Do, DoTx, Run and Resume, the operators'
// actions) is written once, against these interfaces, and exists on every
// driver that implements them: a driver package implements DB for its
// connection pool, and calls the methods of idem.EngineOf with it.
//
// Services rarely import this package; they call the Store's methods, or
// those of the driver's package.
package driver

import (
	"context"
	"errors"
)

// Tx runs statements: in a transaction, or, where it is a DB, each on its
// own. A statement sent on a transaction that has ended returns an error
// that matches sql.ErrTxDone.
type Tx interface {
	// Exec runs a statement and returns how many rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)

	// QueryRow runs a statement that returns at most one row and scans it
	// into dest at once, so that no value of it outlives the call; no row
	// is an error that matches sql.ErrNoRows.
	QueryRow(ctx context.Context, query string, args []any, dest ...any) error

	// Query runs a statement and calls row for each row it returns, in
	// order, with a scan of that row; an error of row ends the query and
	// is returned.
	Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error
}

// Row is the answer of a statement sent with a BEGIN (see DB.Begin). Scan
// returns an error that matches sql.ErrNoRows when there was no row.
type Row interface {
	Scan(dest ...any) error
}

// Statement is one statement with the values of its placeholders, in
// order: what a Store gives a driver to send with a BEGIN (DB.Begin) or
// before a COMMIT (Owned.CommitAfter).
type Statement struct {
	SQL  string
	Args []any
}

// Owned is a transaction that a Store began and ends itself. Its TX is the
// driver's own transaction, which the Store hands to the work it protects
// (a Func, a phase of Run).
type Owned[TX any] interface {
	Tx

	// Native returns the driver's own transaction.
	Native() TX

	// CommitAfter runs st, a statement that must change one row, and then
	// commits, in as few round trips as the driver can. When st affects no
	// row it commits nothing, rolls back and returns ErrNoRow. An error of
	// st is returned as it is, with nothing committed. An error that leaves
	// the commit's outcome open comes as a *CommitError.
	CommitAfter(ctx context.Context, st Statement) error

	// Commit commits the transaction, as it stands.
	Commit(ctx context.Context) error

	// Rollback ends the transaction and keeps nothing. Once the
	// transaction has ended, it sends nothing and returns an error that
	// matches sql.ErrTxDone: the Store tells from it that the work it
	// protects ended the transaction itself, which that work must never do.
	Rollback(ctx context.Context) error
}

// DB is a database that a Store begins its transactions on, with the
// options that the driver's package was given for them.
type DB[TX any] interface {
	// Tx runs statements on their own, outside any transaction.
	Tx

	// Begin begins a transaction and runs first in it, in the round trip
	// of the BEGIN where the driver can; the rows answer first, in order.
	// The caller may leave a row unread, and must read them in order.
	Begin(ctx context.Context, first ...Statement) (Owned[TX], []Row, error)
}

// Pinner is an optional interface of a DB: it lends one connection of its
// pool to a Store whose statements change the session, as a purge of a
// sharded table does when it addresses each shard in turn
// (dialect.ShardTargeter). A session so changed must never serve another
// caller, so the connection never goes back to the pool.
type Pinner[TX any] interface {
	// Pin returns a DB whose statements and transactions all run on one
	// connection, which no other caller uses meanwhile, and a function that
	// closes that connection, never returning it to the pool. The caller
	// calls it once, when done, whatever happened.
	Pin(ctx context.Context) (DB[TX], func() error, error)
}

// CommittedReader is an optional interface of a DB, for the databases whose
// sessions may read rows that other transactions have not committed
// (dialect.Capabilities.ReadsUncommitted). The Store reads a record outside
// any transaction with it, where it has it, and with QueryRow otherwise.
type CommittedReader interface {
	// QueryRowCommitted is QueryRow in a read-only transaction at READ
	// COMMITTED, which sees only committed rows, whatever isolation level
	// the session has.
	QueryRowCommitted(ctx context.Context, query string, args []any, dest ...any) error
}

// ErrNoRow is the error of an Owned's CommitAfter whose statement affected
// no row.
var ErrNoRow = errors.New("idem: the statement before the commit affected no row")

// CommitError is an error of the commit itself, whose outcome may be open:
// the connection may have dropped after the server committed.
type CommitError struct{ Err error }

func (e *CommitError) Error() string { return "commit: " + e.Err.Error() }
func (e *CommitError) Unwrap() error { return e.Err }
