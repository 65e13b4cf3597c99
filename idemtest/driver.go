package idemtest

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idemgo/idem"
)

// Driver is how the properties of TestDriver reach a Store: the transactions
// they hold, and the calls of Do and DoTx with the work those run. A Store
// runs on database/sql (SQLDriver) and, through packages such as idempgx, on
// a driver's own interface; the contract is the same on each, and a Driver
// lets one suite show it on each. Options come as database/sql's, which a
// Driver maps to its own.
type Driver interface {
	// Begin begins a transaction with opts; nil opts are the database's
	// defaults. The properties end it with Commit or Rollback.
	Begin(ctx context.Context, opts *sql.TxOptions) (Tx, error)
	// Do is Store.Do on tx, a transaction of this Driver's Begin, with fn
	// given the transaction as a Tx of this Driver. A nil tx and a nil fn
	// go to the Store as the driver's own nil values, so that the
	// properties see the Store refuse them.
	Do(ctx context.Context, s *idem.Store, tx Tx, key string, reqHash []byte, fn Func) (idem.Result, error)
	// DoTx is Store.DoTx on the Driver's database, in transactions of
	// its own with opts.
	DoTx(ctx context.Context, s *idem.Store, opts *sql.TxOptions, key string, reqHash []byte, fn Func) (idem.Result, error)
	// Refusable is idem.Refusable for the Driver: fn may end with
	// idem.Refuse, and its writes are undone.
	Refusable(fn Func) Func

	// Phase and Final are idem.Phase and idem.Final for the Driver: the
	// step's function gets the phase's transaction as a Tx of this
	// Driver.
	Phase(name string, fn func(ctx context.Context, tx Tx) error) idem.Step
	Final(name string, fn Func) idem.Step
	// Run is Store.Run on the Driver's database, with the database's
	// default transaction options.
	Run(ctx context.Context, s *idem.Store, key string, reqHash []byte, steps ...idem.Step) (idem.Result, error)
	// Resume is Store.Resume on the Driver's database, with the
	// database's default transaction options.
	Resume(ctx context.Context, s *idem.Store, steps idem.StepsFunc, options ...idem.ResumeOption) (idem.ResumeReport, error)
	// Forget is Store.Forget on the Driver's database.
	Forget(ctx context.Context, s *idem.Store, key string) error
}

// Tx is a transaction of a Driver: the one a property holds, or the one
// its Func gets. A statement or a Commit sent after the driver ended the
// transaction returns an error that matches sql.ErrTxDone, as database/sql's
// do, so that a property tells that case from a failure of the database
// whatever the driver, as idem tells it to answer ErrTxEnded.
type Tx interface {
	// Exec runs a statement and returns how many rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a statement that returns at most one row and scans it
	// into dest; no row is an error that matches sql.ErrNoRows.
	QueryRow(ctx context.Context, query string, args []any, dest ...any) error
	// Commit commits the transaction.
	Commit(ctx context.Context) error
	// Rollback rolls the transaction back; after Commit or Rollback it
	// changes nothing, and its error may be ignored.
	Rollback(ctx context.Context) error
}

// Func is the work a key protects, as idem.Func, in a Tx of the Driver that
// runs it: it writes its effect through tx, and must neither commit nor
// roll tx back.
type Func func(ctx context.Context, tx Tx) (idem.Response, error)

// SQLDriver is the Driver of database/sql on db: Store.Do and Store.DoTx
// themselves, and *sql.Tx for the transactions. TestDialect runs the suite
// through it.
func SQLDriver(db *sql.DB) Driver { return sqlDriver{db: db} }

type sqlDriver struct{ db *sql.DB }

// sqlTx is a *sql.Tx as a Tx.
type sqlTx struct{ Tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	r, err := t.Tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (t sqlTx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return t.Tx.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (d sqlDriver) Begin(ctx context.Context, opts *sql.TxOptions) (Tx, error) {
	tx, err := d.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return sqlTx{tx}, nil
}

func (d sqlDriver) Do(ctx context.Context, s *idem.Store, tx Tx, key string, reqHash []byte, fn Func) (idem.Result, error) {
	stx, err := unwrapSQL(tx)
	if err != nil {
		return idem.Result{}, err
	}
	return s.Do(ctx, stx, key, reqHash, sqlFunc(fn))
}

func (d sqlDriver) DoTx(ctx context.Context, s *idem.Store, opts *sql.TxOptions, key string, reqHash []byte, fn Func) (idem.Result, error) {
	return s.DoTx(ctx, d.db, opts, key, reqHash, sqlFunc(fn))
}

func (d sqlDriver) Refusable(fn Func) Func {
	refusable := idem.Refusable(sqlFunc(fn))
	return func(ctx context.Context, tx Tx) (idem.Response, error) {
		stx, err := unwrapSQL(tx)
		if err != nil {
			return idem.Response{}, err
		}
		return refusable(ctx, stx)
	}
}

func (d sqlDriver) Phase(name string, fn func(ctx context.Context, tx Tx) error) idem.Step {
	return idem.Phase(name, func(ctx context.Context, tx *sql.Tx) error { return fn(ctx, sqlTx{tx}) })
}

func (d sqlDriver) Final(name string, fn Func) idem.Step { return idem.Final(name, sqlFunc(fn)) }

func (d sqlDriver) Run(ctx context.Context, s *idem.Store, key string, reqHash []byte, steps ...idem.Step) (idem.Result, error) {
	return s.Run(ctx, d.db, nil, key, reqHash, steps...)
}

func (d sqlDriver) Resume(ctx context.Context, s *idem.Store, steps idem.StepsFunc, options ...idem.ResumeOption) (idem.ResumeReport, error) {
	return s.Resume(ctx, d.db, nil, steps, options...)
}

func (d sqlDriver) Forget(ctx context.Context, s *idem.Store, key string) error {
	return s.Forget(ctx, d.db, key)
}

// unwrapSQL returns the *sql.Tx of tx, nil for a nil tx.
func unwrapSQL(tx Tx) (*sql.Tx, error) {
	if tx == nil {
		return nil, nil
	}
	t, ok := tx.(sqlTx)
	if !ok {
		return nil, fmt.Errorf("%w: a %T is not a transaction of SQLDriver", idem.ErrInvalidArgument, tx)
	}
	return t.Tx, nil
}

// sqlFunc is fn as an idem.Func; nil stays nil, for the Store to refuse.
func sqlFunc(fn Func) idem.Func {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		return fn(ctx, sqlTx{tx})
	}
}

func (t sqlTx) Commit(context.Context) error   { return t.Tx.Commit() }
func (t sqlTx) Rollback(context.Context) error { return t.Tx.Rollback() }
