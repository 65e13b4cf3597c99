package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
)

// Attempts bound the retries of a transaction that conflicted (see
// retrying).
const (
	maxAttempts = 5
	retryBase   = 5 * time.Millisecond
	retryMax    = 250 * time.Millisecond
	// resolveTimeout bounds the lookup that settles a commit whose reply
	// was lost, which runs even if ctx is done.
	resolveTimeout = 10 * time.Second
)

// DoTx runs Do in a transaction of its own: it begins a transaction on db
// with opts, calls Do, commits only when the outcome is Claimed, and rolls
// back otherwise. It always ends the transaction it began, also when fn
// panics (the panic goes on after the rollback). A fn that ended the
// transaction itself gets ErrTxEnded, as from Do: DoTx does not take its
// own rollback, which finds the transaction ended, for one that undid the
// claim.
//
// When the database reports a conflict (ErrRetry), DoTx runs the whole
// transaction again, fn included, up to 5 attempts with growing, jittered
// pauses; after the last it returns the error, which matches ErrRetry.
//
// When the commit fails in a way that leaves its outcome open, as when the
// connection drops before the reply, DoTx looks the key up instead of
// guessing: if this attempt's record is there, the commit happened and the
// result is Claimed; if another request's record is there, DoTx answers from
// it; if there is none, nothing was committed yet and DoTx tries again, and
// should the commit land after all, the next attempt finds that record and
// answers Claimed too. If the lookup fails, it returns ErrCommitUnknown.
//
// DoTx may first read the key's record outside any transaction, and answer
// a retry of a finished request from it, as the Store's LookupPolicy says
// (see WithLookupFirst). The read changes no outcome, only what it costs:
// when the transaction answers InFlight, or fails with ErrRetry after the
// last attempt, DoTx reads the record outside it all the same, and a
// finished record answers Replay or Mismatch, since the key may be held by
// a transaction that only replays it.
func (s *Store) DoTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, key string, reqHash []byte, fn Func) (Result, error) {
	return doTx(ctx, s, sqlOn(db, opts), key, reqHash, fn)
}

// doTx is DoTx on any driver's database: fn is the Func with the driver's
// own transaction.
func doTx[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string, reqHash []byte, fn func(context.Context, TX) (Response, error)) (Result, error) {
	if err := s.on(db, "database"); err != nil {
		return Result{}, err
	}
	if err := validateCall(key, reqHash, fn == nil); err != nil {
		return Result{}, err
	}
	shard, err := s.shardOf(ctx)
	if err != nil {
		return Result{}, err
	}
	find := s.findOutside(db)
	return s.runTx(ctx, key, shard, reqHash, find, func(late *[]int64) (Result, time.Duration, error) {
		return attemptTx(ctx, s, db, find, key, s.newValues(key, shard, reqHash), fn, late)
	})
}

// runTx is DoTx after its arguments were checked, for any driver, for key
// under shard: find reads the record of a key outside any transaction, and attempt runs one
// transaction. It reads first where the policy says so, runs attempt again
// while it answers ErrRetry, and reports the call to the observers and to
// the lookup-first policy.
func (s *Store) runTx(ctx context.Context, key string, shard any, reqHash []byte,
	find findFunc,
	attempt func(late *[]int64) (Result, time.Duration, error),
) (Result, error) {
	start := s.startEvent()
	if s.readFirst() {
		if res, ok, err := s.answerFinished(ctx, find, key, shard, reqHash); ok {
			s.noteOutcome(res, err)
			s.endEvent(ctx, start, key, res, err, 0, 0)
			return res, err
		}
	}
	var (
		wait     time.Duration
		attempts int
		late     []int64 // tokens of attempts whose commit may yet land
	)
	res, err := retrying(ctx, func(context.Context) (Result, error) {
		attempts++
		res, w, err := attempt(&late)
		wait += w
		return res, err
	})
	res, err = s.answerUndecided(ctx, find, key, shard, reqHash, res, err, late)
	if err != nil {
		res = Result{}
	}
	s.noteOutcome(res, err)
	s.endEvent(ctx, start, key, res, err, wait, attempts)
	return res, err
}

// answerFinished answers a request from the committed record of its key,
// read outside any transaction, when that record is live and finished; ok is
// false when a transaction has to decide. A failed read is not an answer
// either: the transaction meets the same trouble and reports it.
func (s *Store) answerFinished(ctx context.Context, find findFunc, key string, shard any, reqHash []byte) (res Result, ok bool, err error) {
	k := []byte(key)
	rec, err := find(ctx, k, shard)
	if err != nil || rec == nil || !rec.finished || !rec.live(s.clock().UnixMicro()) {
		return Result{}, false, nil
	}
	res, err = s.decide(k, reqHash, rec)
	return res, true, err
}

// commitFailed answers a Claimed attempt whose commit failed with cerr,
// from the record that findAfterCommit finds: a record with the token of
// this attempt's claim (v.token) can only be there if the commit went
// through; no live record means that nothing was committed, and the attempt
// can run again, but its commit may yet land, so it adds its token to late;
// another request's record answers as a claim would.
func (s *Store) commitFailed(ctx context.Context, find findFunc, v *values, res Result, cerr error, late *[]int64) (Result, error) {
	rec, err := s.findAfterCommit(ctx, find, v, cerr)
	switch {
	case err != nil:
		return Result{}, err
	case rec == nil || !rec.live(s.clock().UnixMicro()):
		*late = append(*late, v.token)
		return Result{}, retryError("commit failed, nothing was stored", cerr)
	case rec.token == v.token:
		return res, nil
	}
	return s.decide(v.key, v.requestHash, rec)
}

// findAfterCommit reads, with find on a fresh connection, the record of v
// after a commit that failed with cerr, to settle what the commit did. A
// conflict, or a transaction that had ended, means that nothing was
// committed: it returns the commit's error, which matches ErrRetry for a
// conflict. When the lookup fails too, it returns ErrCommitUnknown. The
// lookup runs even if ctx is done.
func (s *Store) findAfterCommit(ctx context.Context, find findFunc, v *values, cerr error) (*record, error) {
	if s.d.Classify(cerr) == dialect.ErrorRetry || errors.Is(cerr, sql.ErrTxDone) {
		return nil, s.wrap("commit", cerr)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	rec, err := find(ctx, v.key, v.shard)
	if err != nil {
		return nil, fmt.Errorf("%w: commit: %w; lookup: %w", ErrCommitUnknown, cerr, err)
	}
	return rec, nil
}

// lateClaim answers Claimed for a Replay of a record that an earlier
// attempt of the same call wrote, whose commit landed after it was given up
// (see attemptTx).
func lateClaim(res Result, err error, late []int64) (Result, bool) {
	if err == nil && res.Outcome == Replay && slices.Contains(late, res.token) {
		res.Outcome = Claimed
		return res, true
	}
	return res, false
}

// attemptTx is one attempt of DoTx for key, with the values v of its
// claim, in a transaction that it begins on db, and also returns how long
// the claim took.
//
// late holds the claim tokens of earlier attempts whose commit failed with
// its outcome open and whose record was not found afterwards. A COMMIT that
// reached the server may still run after that lookup, so a record with one
// of those tokens is this request's own: its response is answered as
// Claimed, not as a Replay of some other request. attemptTx adds to it.
// find reads the record on db, to settle a commit whose reply was lost.
//
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
// sends ClaimLost on its own, a round trip more. database/sql sends each
// statement in a round trip of its own all the same.
func attemptTx[TX any](ctx context.Context, s *Store, db driver.DB[TX], find findFunc, key string, v *values, fn func(context.Context, TX) (Response, error), late *[]int64) (Result, time.Duration, error) {
	claimStart := s.startEvent()
	var first []driver.Statement
	if s.claimWrite.query == "" {
		var lost []any
		if s.claimLost.query != "" && !s.claimedWithoutRow && s.lookupFirst == LookupNever {
			// args fills a buffer of v's, which the claim's arguments
			// take below.
			lost = append(lost, s.claimLost.args(v)...)
		}
		first = append(first, driver.Statement{SQL: s.claim.query, Args: s.claim.args(v)})
		if lost != nil {
			first = append(first, driver.Statement{SQL: s.claimLost.query, Args: lost})
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
		}, s.heldRow(ctx, tx, v))
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

	resp, err := s.runFn(ctx, key, v, func(ctx context.Context) (Response, error) { return fn(ctx, tx.Native()) })
	ended = true // both ways below end the transaction
	if err != nil {
		return Result{}, wait, fnFailedTx(ctx, s, tx, v, err)
	}
	err = tx.CommitAfter(ctx, driver.Statement{SQL: s.complete.query, Args: s.complete.args(v)})
	var cerr *driver.CommitError
	switch {
	case err == nil:
		res.Response = resp
		return res, wait, nil
	case errors.Is(err, driver.ErrNoRow):
		return Result{}, wait, errClaimGone("complete")
	case errors.As(err, &cerr):
		res.Response = resp
		res, err = s.commitFailed(ctx, find, v, res, cerr.Err, late)
		return res, wait, err
	}
	return Result{}, wait, s.afterFn("complete", err)
}

// fnFailedTx ends tx, an attempt's transaction, after fn failed with cause,
// and returns the attempt's error. Its rollback undoes the claim, unless
// the transaction had already ended under fn, which the rollback's answer
// shows: endedUnderFn decides from it as it decides from Do's Abandon, so
// that DoTx answers ErrTxEnded where Do does. After a failure of
// Refusable's savepoint, Abandon goes first, as in Do, to tell a
// transaction that the server ended (ErrRetry) from one that fn ended.
func fnFailedTx[TX any](ctx context.Context, s *Store, tx driver.Owned[TX], v *values, cause error) error {
	var sp *savepointError
	if errors.As(cause, &sp) {
		cause = s.abandonClaim(ctx, tx, v, cause)
	}
	err := tx.Rollback(context.WithoutCancel(ctx))
	if ended := endedUnderFn("rollback", cause, err); ended != nil {
		return ended
	}
	return cause
}

// retrying runs f, one transaction, again while it fails with ErrRetry, up
// to maxAttempts times, with pauses that grow from retryBase up to retryMax,
// with full jitter, so that the transactions that conflicted do not meet
// again. It serves DoTx's attempts and each transaction of Run.
func retrying[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		t, err := f(ctx)
		if !errors.Is(err, ErrRetry) || attempt == maxAttempts {
			return t, err
		}
		pause := min(retryBase<<attempt, retryMax)
		if serr := sleep(ctx, rand.N(pause)+time.Millisecond); serr != nil {
			return t, errors.Join(serr, err)
		}
	}
}
