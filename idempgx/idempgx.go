package idempgx

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
)

// Func is the work that a key protects, as idem.Func, in a pgx transaction:
// it writes its effect in tx, and must neither commit nor roll tx back: Do
// and DoTx answer idem.ErrTxEnded to one that does, as idem's do.
//
// In DoTx, which commits with a COMMIT that pgx's transaction does not see,
// tx and every savepoint set with its Begin, at any depth, refuse each call
// once DoTx has returned, with an error that matches pgx.ErrTxClosed and
// sql.ErrTxDone, rather than send it on a connection back in the pool.
// Their Conn and LargeObjects are pgx's and unguarded: use them only while
// the Func runs.
type Func func(ctx context.Context, tx pgx.Tx) (idem.Response, error)

// Store is an idem.Store on pgx's own interface: the Store's methods, with
// pgx's transactions and pools in place of database/sql's. Make one with
// New; it is safe for concurrent use, as the idem.Store is.
type Store struct{ e idem.Engine[pgx.Tx] }

// New returns s on pgx. Its methods answer idem.ErrInvalidArgument when s
// is nil or was not made by idem.New.
func New(s *idem.Store) *Store { return &Store{e: idem.EngineOf[pgx.Tx](s)} }

// Do is idem.Store.Do in the caller's pgx transaction tx: it runs fn at
// most once for key, in tx, and answers what happened. On Claimed, commit
// tx to keep the effect and the record of the key together; on any other
// outcome or an error, Do wrote nothing. The claim and the completion are
// separate statements here; DoTx, which owns its transaction, saves round
// trips by sending them with BEGIN and COMMIT.
func (s *Store) Do(ctx context.Context, tx pgx.Tx, key string, reqHash []byte, fn Func) (idem.Result, error) {
	return s.e.Do(ctx, callerIn(tx), key, reqHash, fn.in(tx))
}

// DoTx is idem.Store.DoTx on a pgx pool: it begins a transaction on a
// connection of db with opts, runs fn in it for key at most once, commits
// when the outcome is Claimed and rolls back otherwise, and runs the whole
// transaction again on a conflict (idem.ErrRetry), as idem.Store.DoTx does,
// also when a commit's reply was lost. The connection goes back to db when
// DoTx returns.
//
// The claim goes in the round trip of the BEGIN, and the completion in the
// round trip of the COMMIT (see the package documentation). The read of the
// record that a claim finds goes with them when the Store never reads
// first (idem.LookupNever), so that a retry costs two round trips;
// otherwise a retry that comes to the transaction costs three, and retries
// that come often are answered by one read before it. pgx prepares each
// statement the first time a connection sends it, which costs that
// connection one more round trip once.
func (s *Store) DoTx(ctx context.Context, db *pgxpool.Pool, opts pgx.TxOptions, key string, reqHash []byte, fn Func) (idem.Result, error) {
	return s.e.DoTx(ctx, pooled(db, opts), key, reqHash, fn)
}

// Lookup is idem.Store.Lookup on a pgx pool: the live record of key as a
// Result, or idem.ErrNotFound.
func (s *Store) Lookup(ctx context.Context, db *pgxpool.Pool, key string) (idem.Result, error) {
	return s.e.Lookup(ctx, pooled(db, pgx.TxOptions{}), key)
}

// Migrate is idem.Store.Migrate on a pgx pool: it creates the Store's table
// and index if they are missing and brings an older table up to date.
func (s *Store) Migrate(ctx context.Context, db *pgxpool.Pool) error {
	return s.e.Migrate(ctx, pooled(db, pgx.TxOptions{}))
}

// in returns fn bound to tx, the transaction it runs in, as the Engine's
// Do takes it: nil for a nil fn, which Do refuses.
func (fn Func) in(tx pgx.Tx) func(context.Context) (idem.Response, error) {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context) (idem.Response, error) { return fn(ctx, tx) }
}

// Refusable is idem.Refusable for a pgx Func: when fn returns
// idem.Refuse(resp), its writes are undone, back to a savepoint set before
// it ran, and resp is stored as the key's response.
func Refusable(fn Func) Func {
	return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
		if fn == nil {
			return idem.Response{}, fmt.Errorf("%w: nil Func", idem.ErrInvalidArgument)
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return idem.Response{}, fmt.Errorf("idempgx: savepoint: %w", err)
		}
		resp, err := fn(ctx, sp)
		refused, ok := idem.Refused(err)
		if !ok {
			if err == nil {
				err = sp.Commit(ctx)
			}
			return resp, err
		}
		if err := sp.Rollback(ctx); err != nil {
			return idem.Response{}, fmt.Errorf("idempgx: undo refused request: %w", err)
		}
		return refused, nil
	}
}

// Run is idem.Store.Run on a pgx pool: a request of several steps, each
// phase in a transaction of its own on a connection of db, begun with opts.
// The steps' Phase and Final take pgx's transaction, as in
//
//	idem.Phase("reserve", func(ctx context.Context, tx pgx.Tx) error { ... })
//
// which is guarded as a Func's is: it refuses every call once the phase has
// ended. Each phase's last statement goes in the round trip of its COMMIT.
func (s *Store) Run(ctx context.Context, db *pgxpool.Pool, opts pgx.TxOptions, key string, reqHash []byte, steps ...idem.Step) (idem.Result, error) {
	return s.e.Run(ctx, pooled(db, opts), key, reqHash, steps...)
}

// Resume is idem.Store.Resume on a pgx pool: it drives to an end the
// multi-step requests that their clients left unfinished, with the steps
// that steps gives, in transactions begun with opts.
func (s *Store) Resume(ctx context.Context, db *pgxpool.Pool, opts pgx.TxOptions, steps idem.StepsFunc, options ...idem.ResumeOption) (idem.ResumeReport, error) {
	return s.e.Resume(ctx, pooled(db, opts), steps, options...)
}

// Unfinished is idem.Store.Unfinished on a pgx pool.
func (s *Store) Unfinished(ctx context.Context, db *pgxpool.Pool, olderThan time.Duration, limit int) ([]idem.Unfinished, error) {
	return s.e.Unfinished(ctx, pooled(db, pgx.TxOptions{}), olderThan, limit)
}

// Settle is idem.Store.Settle on a pgx pool: an operator's way out for a
// key whose request no one will finish.
func (s *Store) Settle(ctx context.Context, db *pgxpool.Pool, key string, resp idem.Response) error {
	return s.e.Settle(ctx, pooled(db, pgx.TxOptions{}), key, resp)
}

// ReleaseWithoutEffect is idem.Store.ReleaseWithoutEffect on a pgx pool.
func (s *Store) ReleaseWithoutEffect(ctx context.Context, db *pgxpool.Pool, key string) error {
	return s.e.ReleaseWithoutEffect(ctx, pooled(db, pgx.TxOptions{}), key)
}

// ReleaseUndone is idem.Store.ReleaseUndone on a pgx pool.
func (s *Store) ReleaseUndone(ctx context.Context, db *pgxpool.Pool, key string) error {
	return s.e.ReleaseUndone(ctx, pooled(db, pgx.TxOptions{}), key)
}

// Forget is idem.Store.Forget on a pgx pool: it deletes a finished record
// before its retention window ends, so that the key runs anew.
func (s *Store) Forget(ctx context.Context, db *pgxpool.Pool, key string) error {
	return s.e.Forget(ctx, pooled(db, pgx.TxOptions{}), key)
}

// Purge is idem.Store.Purge on a pgx pool: it deletes expired records,
// batch at a time.
func (s *Store) Purge(ctx context.Context, db *pgxpool.Pool, batch int) (int64, error) {
	return s.e.Purge(ctx, pooled(db, pgx.TxOptions{}), batch)
}

// Stats is idem.Store.Stats on a pgx pool: it counts the live, in-flight
// and expired records of the Store's table, in one statement that reads
// every row.
func (s *Store) Stats(ctx context.Context, db *pgxpool.Pool) (idem.Stats, error) {
	return s.e.Stats(ctx, pooled(db, pgx.TxOptions{}))
}

// CountExpired is idem.Store.CountExpired on a pgx pool: it counts the
// records that Purge has yet to delete, through the index on expires_at.
func (s *Store) CountExpired(ctx context.Context, db *pgxpool.Pool) (int64, error) {
	return s.e.CountExpired(ctx, pooled(db, pgx.TxOptions{}))
}
