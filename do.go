package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
	"github.com/idemgo/idem/internal/codec"
)

// newValues returns the values of one claim of key under shard (nil in a
// table without a shard column) for reqHash, stamped with the Store's
// clock, a new claim token, the incarnation of the record it would create,
// where the dialect writes one, and the key's lock number.
func (s *Store) newValues(key string, shard any, reqHash []byte) *values {
	now := s.clock().UnixMicro()
	v := &values{
		key:         []byte(key),
		shard:       shard,
		requestHash: reqHash,
		createdAt:   now,
		expiresAt:   addMicros(now, s.retention),
		token:       s.newToken(),
	}
	if s.incarnations {
		v.incarnation = newIncarnation()
	}
	if s.claim.uses(paramLockID) || s.claimHeld.uses(paramLockID) {
		v.lockID = s.lockID(v.key, shard)
	}
	return v
}

// doOnce is Do after its arguments were checked. It also returns how long the
// claim took.
//
// Everything it sends after fn is guarded by the claim's token (see
// Statements), because the transaction may have ended under it: on MySQL
// and SQLite the server rolls back the whole transaction of a deadlock
// victim or an interrupted statement, and tx then runs each statement on its
// own, in autocommit, beside a duplicate request that may have claimed the
// key in the meantime.
//
// run is fn with the driver's own transaction, which tx carries; v holds
// the values of the claim of key.
func (s *Store) doOnce(ctx context.Context, tx driver.Tx, key string, v *values, run func(context.Context) (Response, error)) (Result, time.Duration, error) {
	claimStart := s.startEvent()
	res, claimed, err := s.claimKey(ctx, tx, v, nil)
	wait := s.since(claimStart)
	if err != nil || !claimed {
		return res, wait, err
	}

	resp, err := s.runFn(ctx, key, v, run)
	if err != nil {
		return Result{}, wait, s.abandonClaim(ctx, tx, v, err)
	}
	n, err := tx.Exec(ctx, s.complete.query, s.complete.args(v)...)
	if err != nil {
		return Result{}, wait, s.afterFn("complete", err)
	}
	if n != 1 {
		return Result{}, wait, errClaimGone("complete")
	}
	res.Response = resp
	return res, wait, nil
}

// runFn runs the Func of key, claimed with v, in the context of the
// request's work, and prepares its response for Complete. An error means
// that nothing may be stored.
func (s *Store) runFn(ctx context.Context, key string, v *values, run func(context.Context) (Response, error)) (Response, error) {
	resp, err := run(s.work(ctx, key, v))
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			err = fmt.Errorf("%w (wrap the Func in Refusable to store it)", err)
		}
		return Response{}, s.wrap("", err)
	}
	if err := s.prepareResponse(v, resp); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// validateCall checks the arguments that Do and DoTx share; noFn is true
// when the Func is nil.
func validateCall(key string, reqHash []byte, noFn bool) error {
	if noFn {
		return fmt.Errorf("%w: nil Func", ErrInvalidArgument)
	}
	if err := validateKey(key); err != nil {
		return err
	}
	if len(reqHash) == 0 || len(reqHash) > MaxHashBytes {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidHash, len(reqHash), MaxHashBytes)
	}
	return nil
}

func validateKey(key string) error {
	if len(key) == 0 || len(key) > MaxStoredKeyBytes {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidKey, len(key), MaxStoredKeyBytes)
	}
	return nil
}

func addMicros(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// prepareResponse checks resp against the limits and fills in what Complete
// stores.
func (s *Store) prepareResponse(v *values, resp Response) error {
	if resp.Status < math.MinInt32 || resp.Status > math.MaxInt32 {
		return fmt.Errorf("%w: status %d does not fit in 32 bits", ErrInvalidArgument, resp.Status)
	}
	header := codec.EncodeHeader(resp.Header)
	if size := len(header) + len(resp.Body); size > s.maxResponseBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrResponseTooLarge, size, s.maxResponseBytes)
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	sum := codec.Checksum(v.key, v.requestHash, int64(resp.Status), header, body)
	v.status, v.header, v.body, v.checksum = int64(resp.Status), header, body, sum[:]
	return nil
}

// abandonClaim deletes the record this call claimed, so that a caller who
// commits anyway stores nothing, and returns cause, with a word on the
// transaction when the delete shows that it had ended.
//
// A cause that matches ErrRetry is a conflict the transaction did not
// survive: on PostgreSQL it is aborted, on MySQL already rolled back, so
// nothing more is sent. Otherwise a failed delete means a transaction that is
// already broken and cannot commit, and adds nothing to cause.
func (s *Store) abandonClaim(ctx context.Context, tx driver.Tx, v *values, cause error) error {
	if errors.Is(cause, ErrRetry) {
		return cause
	}
	n, err := tx.Exec(context.WithoutCancel(ctx), s.abandon.query, s.abandon.args(v)...)
	if ended := endedUnderFn("abandon", cause, err); ended != nil {
		return ended
	}
	if err == nil && n == 0 {
		var sp *savepointError
		if errors.As(cause, &sp) {
			// Refusable's savepoint went with the transaction: nothing
			// that fn did is left to store, and a new transaction may
			// claim the key again.
			return fmt.Errorf("idem: %s: %w: the server ended the transaction in the Func, and its claim of the key is gone; nothing was stored: %w", sp.op, ErrRetry, sp.err)
		}
		return fmt.Errorf("%w; and the transaction had already ended: its claim of the key was gone", cause)
	}
	return cause
}

// afterFn is the error of a statement that Do sends after fn on tx.
func (s *Store) afterFn(op string, err error) error {
	if ended := endedUnderFn(op, nil, err); ended != nil {
		return ended
	}
	return s.wrap(op, err)
}

// endedUnderFn decides, for Do and DoTx alike and on every driver, whether
// the transaction had ended under fn: err is the answer of op, what was
// done to the transaction after fn (Do's completion or Abandon, DoTx's
// completion or rollback), and cause is fn's error, nil when fn answered.
// An err that matches sql.ErrTxDone, as database/sql answers once fn
// committed or rolled back tx, and idempgx's transactions answer too, makes
// it ErrTxEnded, which also matches cause, so that fn's own error is not
// lost. It is nil otherwise; for a cause that already matches ErrTxEnded,
// decided before; and for a conflict (ErrRetry), after which Do sends
// nothing and so cannot tell: DoTx, whose rollback could, answers as Do
// does, and runs the transaction again.
func endedUnderFn(op string, cause, err error) error {
	switch {
	case !errors.Is(err, sql.ErrTxDone), errors.Is(cause, ErrRetry), errors.Is(cause, ErrTxEnded):
		return nil
	case cause == nil:
		return txEnded(op)
	}
	return fmt.Errorf("%w; and %w", cause, txEnded(op))
}

// txEnded is the error of a statement sent on a transaction that
// database/sql knows has ended.
func txEnded(op string) error {
	return fmt.Errorf("idem: %s: %w (%w): fn committed or rolled back tx, or the context given to BeginTx was done", op, ErrTxEnded, sql.ErrTxDone)
}

// errClaimGone is the error of a guarded statement that affected no row:
// the transaction ended under Do (the server rolled it back and tx went on in
// autocommit), so its claim and fn's effect are gone, and the key may
// already belong to a duplicate request. Running the transaction again
// finds that request's record, or claims the key anew.
func errClaimGone(op string) error {
	return fmt.Errorf("idem: %s: %w: the transaction ended before Do was done with it, and its claim of the key is gone; nothing was stored", op, ErrRetry)
}

// wrap marks err as ErrRetry when the dialect reports it as a conflict. op
// names the statement; an empty op leaves a non-conflict error as it is.
func (s *Store) wrap(op string, err error) error {
	if err == nil || errors.Is(err, ErrRetry) {
		return err
	}
	if s.d.Classify(err) == dialect.ErrorRetry {
		if op == "" {
			op = "in Func"
		}
		return retryError(op, err)
	}
	if op == "" {
		return err
	}
	if s.d.Classify(err) == dialect.ErrorMissingColumn {
		return s.missingColumn(op, err)
	}
	if h, ok := s.d.(dialect.Hinter); ok {
		if hint := h.Hint(err); hint != "" {
			return fmt.Errorf("idem: %s: %w (%s)", op, err, hint)
		}
	}
	return fmt.Errorf("idem: %s: %w", op, err)
}

// missingColumn is the error of the statement of op that named a column
// that the table lacks: a table without the shard column of a Store with
// one, which is ErrInvalidArgument as New's options are, or a table of an
// earlier version that was not migrated.
func (s *Store) missingColumn(op string, err error) error {
	if s.sharded() && strings.Contains(err.Error(), "shard_key") {
		return fmt.Errorf("%w: idem: %s: the table %s has no shard_key column, which idem.WithShardColumn(%v) needs: it was made without one; see docs/operations.md, \"Moving a table to a shard column\" (%w)",
			ErrInvalidArgument, op, s.table, s.shardKind, err)
	}
	return fmt.Errorf("idem: %s: %w (the table %s lacks a column of this version's: run Store.Migrate, or the migration files, as docs/operations.md, \"Upgrading the table\", says)", op, err, s.table)
}
