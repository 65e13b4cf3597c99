package idem

import (
	"context"
	"errors"
)

// answerUndecided answers a DoTx call whose transactions did not decide it
// (res and err are what they gave) from the committed record of its key,
// read outside any transaction, when that record is live and finished, as
// a read before the transaction would have answered it: late is as
// attemptTx keeps it. Only InFlight and an error that matches ErrRetry are
// undecided; every other answer is returned as it is, and so are these
// when the read finds no record, an unfinished or expired one, or fails.
//
// A finished key can be held by a transaction that only replays it: the
// MySQL family's claim locks the record that it finds, also when it changes
// nothing, until its transaction ends, and on SQLite any open transaction
// holds the write lock, which a transaction waits for at BEGIN. A claim
// that waits for it in vain would answer InFlight, or ErrRetry on SQLite,
// to a request that is finished, where a Store that read first answered
// Replay. Read in the claim's transaction, the record could not be trusted
// (see claimKey: READ UNCOMMITTED sees a response before it is committed,
// and SERIALIZABLE waits again); read outside, at the connection's own
// isolation level, it is the last committed, and the read waits for no
// lock. A key held by an unfinished claim still answers InFlight: the
// holder's record is not committed, or not finished. A record with the
// token of an earlier attempt, whose commit landed after it was given up,
// is this call's own, and answers Claimed.
func (s *Store) answerUndecided(ctx context.Context, find findFunc, key string, shard any, reqHash []byte, res Result, err error, late []int64) (Result, error) {
	undecided := err == nil && res.Outcome == InFlight || errors.Is(err, ErrRetry)
	if !undecided {
		return res, err
	}
	fres, ok, ferr := s.answerFinished(ctx, find, key, shard, reqHash)
	if !ok {
		return res, err
	}
	if own, ok := lateClaim(fres, ferr, late); ok {
		return own, nil
	}
	return fres, ferr
}
