package idem

import (
	"context"
	"errors"
	"time"

	"github.com/idemgo/idem/driver"
)

// Engine is a Store on a driver other than database/sql, whose transactions
// are of type TX: the seam that a driver's package (idempgx, for pgx) builds
// its API on, so that every operation of a Store exists on every driver,
// written once. Its methods are the Store's, with the driver's database and
// transactions; services call the Store's methods, or those of the driver's
// package. Make one with EngineOf; the zero Engine has no Store, and its
// methods return ErrInvalidArgument, as they do for a nil database.
//
// Each method of the Store, of the Engine and of a driver's package passes
// its arguments to one function that holds the operation, its checks
// included, so that the three cannot differ but in the types of their
// databases and transactions (TestFacadesAgree).
type Engine[TX any] struct{ s *Store }

// EngineOf returns s on the driver whose transactions are of type TX.
func EngineOf[TX any](s *Store) Engine[TX] { return Engine[TX]{s: s} }

// Do is Store.Do on tx, a transaction of the driver's that the caller
// began; run is the Func with the driver's own transaction, nil for none.
func (e Engine[TX]) Do(ctx context.Context, tx driver.Tx, key string, reqHash []byte, run func(context.Context) (Response, error)) (Result, error) {
	return do(ctx, e.s, tx, key, reqHash, run)
}

// DoTx is Store.DoTx on db, whose transactions begin with the options that
// the driver's package gave it; fn gets each transaction that DoTx began.
func (e Engine[TX]) DoTx(ctx context.Context, db driver.DB[TX], key string, reqHash []byte, fn func(context.Context, TX) (Response, error)) (Result, error) {
	return doTx(ctx, e.s, db, key, reqHash, fn)
}

// Lookup is Store.Lookup on db.
func (e Engine[TX]) Lookup(ctx context.Context, db driver.DB[TX], key string) (Result, error) {
	return lookup(ctx, e.s, db, key)
}

// Migrate is Store.Migrate on db.
func (e Engine[TX]) Migrate(ctx context.Context, db driver.DB[TX]) error {
	return migrate(ctx, e.s, db)
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
	return run(ctx, e.s, db, key, reqHash, steps)
}

// Resume is Store.Resume on db.
func (e Engine[TX]) Resume(ctx context.Context, db driver.DB[TX], steps StepsFunc, options ...ResumeOption) (ResumeReport, error) {
	return resume(ctx, e.s, db, steps, options...)
}

// Unfinished is Store.Unfinished on db.
func (e Engine[TX]) Unfinished(ctx context.Context, db driver.DB[TX], olderThan time.Duration, limit int) ([]Unfinished, error) {
	return unfinished(ctx, e.s, db, olderThan, limit)
}

// Settle is Store.Settle on db.
func (e Engine[TX]) Settle(ctx context.Context, db driver.DB[TX], key string, resp Response) error {
	return settle(ctx, e.s, db, key, resp)
}

// ReleaseWithoutEffect is Store.ReleaseWithoutEffect on db.
func (e Engine[TX]) ReleaseWithoutEffect(ctx context.Context, db driver.DB[TX], key string) error {
	return releaseWithoutEffect(ctx, e.s, db, key)
}

// ReleaseUndone is Store.ReleaseUndone on db.
func (e Engine[TX]) ReleaseUndone(ctx context.Context, db driver.DB[TX], key string) error {
	return releaseUndone(ctx, e.s, db, key)
}

// Forget is Store.Forget on db.
func (e Engine[TX]) Forget(ctx context.Context, db driver.DB[TX], key string) error {
	return forget(ctx, e.s, db, key)
}

// Purge is Store.Purge on db.
func (e Engine[TX]) Purge(ctx context.Context, db driver.DB[TX], batch int) (int64, error) {
	return purge(ctx, e.s, db, batch)
}

// Stats is Store.Stats on db.
func (e Engine[TX]) Stats(ctx context.Context, db driver.DB[TX]) (Stats, error) {
	return stats(ctx, e.s, db)
}

// CountExpired is Store.CountExpired on db.
func (e Engine[TX]) CountExpired(ctx context.Context, db driver.DB[TX]) (int64, error) {
	return countExpired(ctx, e.s, db)
}
