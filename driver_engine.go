package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/driver"
)

// Engine is a Store on a driver other than database/sql, whose transactions
// are of type TX: the seam that a driver's package (idempgx, for pgx) builds
// its API on, so that every operation of a Store exists on every driver,
// written once. Its methods are the Store's, with the driver's database and
// transactions; services call the Store's methods, or those of the driver's
// package. Make one with EngineOf; the zero Engine has no Store, and its
// methods return ErrInvalidArgument.
type Engine[TX any] struct{ s *Store }

// EngineOf returns s on the driver whose transactions are of type TX.
func EngineOf[TX any](s *Store) Engine[TX] { return Engine[TX]{s: s} }

// Do is Store.Do on tx, a transaction of the driver's that the caller
// began; run is the Func with the driver's own transaction, nil for none.
func (e Engine[TX]) Do(ctx context.Context, tx driver.Tx, key string, reqHash []byte, run func(context.Context) (Response, error)) (Result, error) {
	if err := e.s.check(); err != nil {
		return Result{}, err
	}
	if tx == nil {
		return Result{}, fmt.Errorf("%w: nil transaction", ErrInvalidArgument)
	}
	return e.s.doCall(ctx, tx, key, reqHash, run)
}

// DoTx is Store.DoTx on db, whose transactions begin with the options that
// the driver's package gave it; fn gets each transaction that DoTx began.
func (e Engine[TX]) DoTx(ctx context.Context, db driver.DB[TX], key string, reqHash []byte, fn func(context.Context, TX) (Response, error)) (Result, error) {
	if err := e.s.check(); err != nil {
		return Result{}, err
	}
	if db == nil {
		return Result{}, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return doTx(ctx, e.s, db, key, reqHash, fn)
}

// Lookup is Store.Lookup on db.
func (e Engine[TX]) Lookup(ctx context.Context, db driver.DB[TX], key string) (Result, error) {
	if err := e.s.check(); err != nil {
		return Result{}, err
	}
	if db == nil {
		return Result{}, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return e.s.lookupWith(ctx, e.s.findOutside(db), key)
}

// Migrate is Store.Migrate on db.
func (e Engine[TX]) Migrate(ctx context.Context, db driver.DB[TX]) error {
	if err := e.s.check(); err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return e.s.migrate(ctx, db)
}

// Refused returns the response that err, the error of a Func, carries when
// it is Refuse's: a driver's own Refusable stores it after undoing the
// Func's writes.
func Refused(err error) (Response, bool) {
	var r *refusal
	if errors.As(err, &r) {
		return r.resp, true
	}
	return Response{}, false
}

// Run is Store.Run on db, whose transactions begin with the options that
// the driver's package gave it; the steps' Phase and Final take the
// driver's transaction, TX.
func (e Engine[TX]) Run(ctx context.Context, db driver.DB[TX], key string, reqHash []byte, steps ...Step) (Result, error) {
	if err := e.s.check(); err != nil {
		return Result{}, err
	}
	if db == nil {
		return Result{}, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return run(ctx, e.s, db, key, reqHash, steps, EventCall)
}

// Resume is Store.Resume on db.
func (e Engine[TX]) Resume(ctx context.Context, db driver.DB[TX], steps StepsFunc, options ...ResumeOption) (ResumeReport, error) {
	if err := e.s.check(); err != nil {
		return ResumeReport{}, err
	}
	if db == nil {
		return ResumeReport{}, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return resume(ctx, e.s, db, steps, options)
}

// Unfinished is Store.Unfinished on db.
func (e Engine[TX]) Unfinished(ctx context.Context, db driver.DB[TX], olderThan time.Duration, limit int) ([]Unfinished, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return e.s.unfinished(ctx, db, olderThan, limit, false)
}

// Settle is Store.Settle on db.
func (e Engine[TX]) Settle(ctx context.Context, db driver.DB[TX], key string, resp Response) error {
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return settle(ctx, e.s, db, key, resp)
}

// ReleaseWithoutEffect is Store.ReleaseWithoutEffect on db.
func (e Engine[TX]) ReleaseWithoutEffect(ctx context.Context, db driver.DB[TX], key string) error {
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return deleteUnfinished(ctx, e.s, db, key, false)
}

// ReleaseUndone is Store.ReleaseUndone on db.
func (e Engine[TX]) ReleaseUndone(ctx context.Context, db driver.DB[TX], key string) error {
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return deleteUnfinished(ctx, e.s, db, key, true)
}

// Forget is Store.Forget on db.
func (e Engine[TX]) Forget(ctx context.Context, db driver.DB[TX], key string) error {
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return forget(ctx, e.s, db, key)
}

// Purge is Store.Purge on db.
func (e Engine[TX]) Purge(ctx context.Context, db driver.DB[TX], batch int) (int64, error) {
	if db == nil {
		return 0, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return purge(ctx, e.s, db, batch)
}

// Stats is Store.Stats on db.
func (e Engine[TX]) Stats(ctx context.Context, db driver.DB[TX]) (Stats, error) {
	if db == nil {
		return Stats{}, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return stats(ctx, e.s, db)
}

// CountExpired is Store.CountExpired on db.
func (e Engine[TX]) CountExpired(ctx context.Context, db driver.DB[TX]) (int64, error) {
	if db == nil {
		return 0, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return countExpired(ctx, e.s, db)
}
