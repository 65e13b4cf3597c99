package idem

import (
	"context"
	"errors"
	"time"

	"github.com/idemgo/idem/internal/txn"
)

func init() { txn.Engine = engine{} }

// engine is what package idempgx calls, through txn.Engine, to run a Store
// on a driver other than database/sql: the same claim, completion, retries,
// observers and lookup-first policy as Do and DoTx, and the same checks of
// the arguments. Its methods are exported for idempgx alone; they are not
// part of this package's API.
type engine struct{}

// Do is Store.Do on tx, which carries the driver's transaction; run is the
// Func with that transaction.
func (engine) Do(ctx context.Context, s *Store, tx txn.Tx, key string, reqHash []byte, run func(context.Context) (Response, error)) (Result, error) {
	if err := s.check(); err != nil {
		return Result{}, err
	}
	return s.doCall(ctx, tx, key, reqHash, run)
}

// DoTx is Store.DoTx on db; fn is the Func with the transaction the Store
// began.
func (engine) DoTx(ctx context.Context, s *Store, db txn.DB, key string, reqHash []byte, fn func(context.Context, txn.Owned) (Response, error)) (Result, error) {
	if err := s.check(); err != nil {
		return Result{}, err
	}
	if err := validateCall(key, reqHash, fn == nil); err != nil {
		return Result{}, err
	}
	find := func(ctx context.Context, k []byte) (*record, error) { return s.findIn(ctx, db, k) }
	return s.runTx(ctx, key, reqHash, find, func(late *[]int64) (Result, time.Duration, error) {
		return s.attemptOwned(ctx, db, find, s.newValues(key, reqHash), fn, late)
	})
}

// Lookup is Store.Lookup on db.
func (engine) Lookup(ctx context.Context, s *Store, db txn.DB, key string) (Result, error) {
	if err := s.check(); err != nil {
		return Result{}, err
	}
	return s.lookupWith(ctx, func(ctx context.Context, k []byte) (*record, error) { return s.findIn(ctx, db, k) }, key)
}

// Migrate is Store.Migrate on db.
func (engine) Migrate(ctx context.Context, s *Store, db txn.DB) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.migrate(ctx, db.Exec, func(ctx context.Context, q string) (n int, err error) {
		err = db.QueryRow(ctx, q, nil, &n)
		return n, err
	})
}

// Refused returns the response of a Func's error made by Refuse.
func (engine) Refused(err error) (Response, bool) {
	var r *refusal
	if errors.As(err, &r) {
		return r.resp, true
	}
	return Response{}, false
}

// attemptOwned is one attempt of DoTx in a transaction that it begins on db.
// Where the claim is one statement, it goes with the BEGIN, and the
// completion goes with the COMMIT: a new key costs BEGIN with the claim,
// fn's statements, and the completion with COMMIT.
//
// ClaimLost, which a claim that found a record needs, goes with the BEGIN too
// when the Store never reads first (LookupNever): every retry then
// comes to the transaction, and costs two round trips, BEGIN with the claim
// and ClaimLost, and ROLLBACK. Otherwise retries that are frequent are
// answered by the read before the transaction, and a ClaimLost sent with
// every claim would cost each new key more server time than it saves the
// rare retry that comes to the transaction (docs/performance.md): that retry
// sends ClaimLost on its own, a round trip more.
func (s *Store) attemptOwned(ctx context.Context, db txn.DB, find findFunc, v *values, fn func(context.Context, txn.Owned) (Response, error), late *[]int64) (Result, time.Duration, error) {
	claimStart := s.startEvent()
	var first []txn.Query
	if s.claimWrite.query == "" {
		var lost []any
		if s.claimLost.query != "" && !s.claimedWithoutRow && s.lookupFirst == LookupNever {
			// args fills a buffer of v's, which the claim's arguments
			// take below.
			lost = append(lost, s.claimLost.args(v)...)
		}
		first = append(first, txn.Query{SQL: s.claim.query, Args: s.claim.args(v)})
		if lost != nil {
			first = append(first, txn.Query{SQL: s.claimLost.query, Args: lost})
		}
	}
	tx, rows, err := db.Begin(ctx, first...)
	if err != nil {
		return Result{}, 0, s.wrap("begin", err)
	}
	ended := false
	defer func() {
		if !ended {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	var answer *claimAnswer
	if len(rows) > 0 {
		a := s.readClaim(v, rows[0].Scan, func(dest ...any) error {
			if len(rows) > 1 {
				return rows[1].Scan(dest...)
			}
			return tx.QueryRow(ctx, s.claimLost.query, s.claimLost.args(v), dest...)
		})
		answer = &a
	}
	res, claimed, err := s.claimKey(ctx, tx, v, answer)
	wait := s.since(claimStart)
	if res, ok := lateClaim(res, err, *late); ok {
		return res, wait, nil
	}
	if err != nil || !claimed {
		return res, wait, err
	}

	resp, err := s.runFn(ctx, v, func(ctx context.Context) (Response, error) { return fn(ctx, tx) })
	var sp *savepointError
	if errors.As(err, &sp) {
		err = s.abandonClaim(ctx, tx, v, err) // did the transaction end under fn?
	}
	if err != nil {
		return Result{}, wait, err // the rollback undoes the claim
	}
	ended = true // CommitAfter ends the transaction, whatever it answers
	err = tx.CommitAfter(ctx, txn.Query{SQL: s.complete.query, Args: s.complete.args(v)})
	var cerr *txn.CommitError
	switch {
	case err == nil:
		res.Response = resp
		return res, wait, nil
	case errors.Is(err, txn.ErrNoRow):
		return Result{}, wait, errClaimGone("complete")
	case errors.As(err, &cerr):
		res.Response = resp
		res, err = s.commitFailed(ctx, find, v, res, cerr.Err, late)
		return res, wait, err
	}
	return Result{}, wait, s.afterFn("complete", err)
}
