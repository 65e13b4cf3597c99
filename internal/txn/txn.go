// Package txn is the seam between a Store and the driver that carries its
// statements. Package idem reaches database/sql through it, and package
// idempgx reaches pgx: the claim, the completion and the retries are written
// once, against these interfaces.
package txn

import (
	"context"
	"errors"
)

// Row is the answer of a statement that returns at most one row. Scan
// returns an error that matches sql.ErrNoRows when there was no row.
type Row interface {
	Scan(dest ...any) error
}

// Querier runs a statement that returns at most one row.
type Querier interface {
	// QueryRow runs query and scans its row into dest; no row is an error
	// that matches sql.ErrNoRows. The row is scanned at once, so that no
	// value of it outlives the call.
	QueryRow(ctx context.Context, query string, args []any, dest ...any) error
}

// Tx is a transaction as a Store sends its statements through it. A
// statement sent on a transaction that has ended returns an error that
// matches sql.ErrTxDone.
type Tx interface {
	Querier
	// Exec runs a statement and returns how many rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}

// Query is one statement with its arguments.
type Query struct {
	SQL  string
	Args []any
}

// Owned is a transaction that a Store began and ends itself.
type Owned interface {
	Tx
	// CommitAfter runs q, the completion of the claim, and then commits,
	// in as few round trips as the driver can. When q affects no row it
	// commits nothing, rolls back and returns ErrNoRow. An error of q is
	// returned as it is, with nothing committed. An error that leaves the
	// commit's outcome open comes as a *CommitError.
	CommitAfter(ctx context.Context, q Query) error
	// Rollback ends the transaction and keeps nothing. It does nothing
	// once the transaction has ended.
	Rollback(ctx context.Context) error
}

// DB is a database a Store begins its own transactions on.
type DB interface {
	// Querier runs its statements on their own, outside any transaction.
	Querier
	// Exec runs a statement on its own, outside any transaction.
	Exec(ctx context.Context, query string) error
	// Begin begins a transaction and runs first in it, in the round trip
	// of the BEGIN where the driver can; the rows answer first, in order.
	// The caller may leave a row unread, and must read them in order.
	Begin(ctx context.Context, first ...Query) (Owned, []Row, error)
}

// ErrNoRow is the error of an Owned's CommitAfter whose completion
// affected no row.
var ErrNoRow = errors.New("the completion affected no row")

// CommitError is an error of the commit itself, whose outcome may be open:
// the connection may have dropped after the server committed.
type CommitError struct{ Err error }

func (e *CommitError) Error() string { return "commit: " + e.Err.Error() }
func (e *CommitError) Unwrap() error { return e.Err }

// Engine holds package idem's implementation of what idempgx calls. It is
// an any because this package cannot name idem's types; idempgx asserts it
// to an interface of its own, and reports a mismatch of the two packages'
// versions as an error.
var Engine any
