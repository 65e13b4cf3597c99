package idem

import (
	"fmt"
	"time"

	"github.com/idemgo/idem/dialect"
)

// Resume's back-off after a request it failed to finish: it leaves
// the request alone for resumeBackoffBase after the first failure, twice as
// long after each next one, and never longer than resumeBackoffMax. The
// request's client may retry it meanwhile, as ever.
const (
	resumeBackoffBase = 10 * time.Second
	resumeBackoffMax  = 15 * time.Minute
)

// stepStatements are the bound statements of a dialect's RunStatements
// (see there for what each does).
type stepStatements struct {
	lock, tryLock, start, progress, takeover, advance, mark, renew, finish, release statement
	unfinished, resumable, backoff                                                  statement
}

// bindSteps binds the statements of multi-step requests of q with bd, or
// returns nil when the dialect has none: all of them empty.
func bindSteps(bd binder, q dialect.RunStatements) (*stepStatements, error) {
	d := bd.d
	if q == (dialect.RunStatements{}) {
		return nil, nil
	}
	var s stepStatements
	response := []param{paramKey, paramToken, paramPhase, paramStatus, paramHeader, paramBody, paramChecksum, paramExpiresAt}
	for _, b := range []struct {
		dst    *statement
		what   string
		sql    string
		params []param
	}{
		{&s.lock, "Run.Lock", q.Lock, []param{paramLockID}},
		{&s.tryLock, "Run.TryLock", q.TryLock, []param{paramLockID}},
		{&s.start, "Run.Start", q.Start, []param{paramKey, paramToken, paramPhase, paramLease, paramClockOffset, paramExpiresAt}},
		{&s.progress, "Run.Progress", q.Progress, []param{paramKey, paramClockOffset}},
		{&s.takeover, "Run.Takeover", q.Takeover, []param{paramKey, paramToken, paramPrevToken, paramLease, paramClockOffset}},
		{&s.advance, "Run.Advance", q.Advance, []param{paramKey, paramToken, paramPrevToken, paramLease, paramClockOffset}},
		{&s.mark, "Run.Mark", q.Mark, []param{paramKey, paramToken, paramPhase, paramLease, paramClockOffset}},
		{&s.renew, "Run.Renew", q.Renew, []param{paramKey, paramToken, paramLease, paramClockOffset}},
		{&s.finish, "Run.Finish", q.Finish, response},
		{&s.release, "Run.Release", q.Release, []param{paramKey, paramToken, paramPrevToken, paramClockOffset}},
		{&s.unfinished, "Run.Unfinished", q.Unfinished, []param{paramExpiresAt, paramCreatedAt, paramLimit, paramClockOffset}},
		{&s.resumable, "Run.Resumable", q.Resumable, []param{paramExpiresAt, paramCreatedAt, paramLimit, paramClockOffset}},
		{&s.backoff, "Run.Backoff", q.Backoff, []param{paramKey, paramClockOffset, paramBackoffBase, paramBackoffMax}},
	} {
		if b.sql == "" {
			if b.dst == &s.lock || b.dst == &s.tryLock {
				continue
			}
			return nil, fmt.Errorf("%w: %s dialect sets some of its Run statements and not %s: set all or none", ErrInvalidArgument, d.Name(), b.what)
		}
		st, err := bd.bind(b.what, b.sql, b.params...)
		if err != nil {
			return nil, err
		}
		*b.dst = st
	}
	if (s.lock.query == "") != (s.tryLock.query == "") {
		return nil, fmt.Errorf("%w: %s dialect sets one of Run.Lock and Run.TryLock: set both or neither", ErrInvalidArgument, d.Name())
	}
	return &s, nil
}

// dbClockOffset is what the statements of leases add to the database's
// clock, in microseconds: 0 but in tests (internal/testhook).
func (s *Store) dbClockOffset() int64 {
	if s.leaseClock == nil {
		return 0
	}
	return s.leaseClock().Microseconds()
}
