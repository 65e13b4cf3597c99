package idem

import (
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem/internal/testhook"
)

// stepSQL holds the statements of multi-step requests (Store.Run) on one
// table. They use the columns phase and lease_until, which plain records
// leave NULL, and bind the parameters {phase}, {lease}, {clock_offset} and
// {prev_token} besides the Statements' own.
//
// Leases run on the database's clock, read in SQL by every statement that
// sets or compares one, so that the app servers' clocks, which may differ
// by minutes, never decide whether a runner is alive. lease_until is in
// microseconds since the Unix epoch by that clock; {lease} is the lease's
// length, and {clock_offset} is added to the clock's reading, 0 but in the
// tests that move it forward (internal/testhook).
type stepSQL struct {
	// lock, where the dialect has one, waits for the key's lock before a
	// phase changes the record, so that a claim of the same key meanwhile
	// sees the key held instead of waiting for the phase's row.
	lock string
	// tryLock, where the dialect has lock, takes the key's lock without
	// waiting, and answers whether it did: before a takeover, it tells a
	// phase that runs from one that has ended.
	tryLock string
	// start marks the record this transaction just claimed as a
	// multi-step request: its recovery point, its lease, and an expiry
	// that never comes while it is unfinished.
	start string
	// progress reads the recovery point, lease and claim token of an
	// unfinished multi-step request, when it was created, and the
	// database's clock.
	progress string
	// takeover makes the request this call's, with a new token and lease,
	// provided the lease it read has run out and no one took it since.
	takeover string
	// advance, first in a phase's transaction, makes the request the
	// phase's with a new token and renews the lease, provided this call
	// still holds it: its fence. The new token also tells, at the end of
	// the phase, whether the transaction is still the one that began.
	advance string
	// mark moves the recovery point at the end of a phase, and sets the
	// lease from then, the phase's commit; no row means that the server
	// ended the transaction under the phase.
	mark string
	// renew sets the lease from now while a call runs, outside any
	// transaction, provided the request is still this call's.
	renew string
	// finish stores the final response and the retention from now.
	finish string
	// release ends this call's lease at once, so that a retry need not
	// wait for it to run out. It takes the token of the last phase or
	// the one before, since a commit that failed may or may not have
	// landed.
	release string
	// unfinished lists, oldest first, the unfinished requests created at
	// or before {created_at}, with their back-off and the database's
	// clock. They are the records whose expires_at is never, which the
	// index on expires_at finds.
	unfinished string
	// resumable is unfinished without the requests whose lease is live
	// or whose back-off has not passed: those a Resumer takes.
	resumable string
	// backoff notes that a Resumer failed to finish the request: the
	// back-off doubles, from resumeBackoffBase up to resumeBackoffMax,
	// and counts from now, or from the end of a lease still live.
	backoff string
}

// stepDialect is implemented by the built-in dialects, whose tables have
// the columns of multi-step requests.
type stepDialect interface {
	stepStatements(table string) stepSQL
}

// stepTemplate writes the statements for the quoted table t and key
// column k, on a database whose clock, in microseconds since the Unix epoch,
// the expression clock reads, and whose functions of the smaller and the
// larger of two numbers are least and greatest.
func stepTemplate(t, k, clock, least, greatest string) stepSQL {
	r := strings.NewReplacer("{T}", t, "{K}", k, "{NOW}", "("+clock+" + {clock_offset})",
		"{LEAST}", least, "{GREATEST}", greatest,
		"{BASE}", strconv.FormatInt(resumeBackoffBase.Microseconds(), 10),
		"{MAX}", strconv.FormatInt(resumeBackoffMax.Microseconds(), 10))
	const (
		mine    = `{K} = {key} AND token = {token} AND status IS NULL`
		lease   = `lease_until = {NOW} + {lease}`
		advance = `UPDATE {T} SET token = {token}, ` + lease + ` WHERE {K} = {key} AND token = {prev_token} AND status IS NULL`
	)
	return stepSQL{
		start:    r.Replace(`UPDATE {T} SET phase = {phase}, ` + lease + `, expires_at = {expires_at} WHERE ` + mine),
		progress: r.Replace(`SELECT phase, lease_until, token, created_at, {NOW} FROM {T} WHERE {K} = {key} AND status IS NULL AND phase IS NOT NULL`),
		takeover: r.Replace(advance + ` AND phase IS NOT NULL AND lease_until <= {NOW}`),
		advance:  r.Replace(advance),
		mark:     r.Replace(`UPDATE {T} SET phase = {phase}, ` + lease + ` WHERE ` + mine),
		renew:    r.Replace(`UPDATE {T} SET ` + lease + ` WHERE ` + mine),
		finish:   r.Replace(`UPDATE {T} SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE ` + mine),
		release:  r.Replace(`UPDATE {T} SET lease_until = {NOW} WHERE {K} = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL`),
		unfinished: r.Replace(unfinishedSelect + `
ORDER BY created_at LIMIT {limit}`),
		resumable: r.Replace(unfinishedSelect + ` AND lease_until + COALESCE(resume_backoff, 0) <= {NOW}
ORDER BY created_at LIMIT {limit}`),
		backoff: r.Replace(`UPDATE {T} SET resume_backoff = {LEAST}({MAX}, COALESCE(resume_backoff * 2, {BASE})),
lease_until = {GREATEST}(lease_until, {NOW}) WHERE {K} = {key} AND status IS NULL AND phase IS NOT NULL`),
	}
}

// unfinishedSelect lists unfinished requests, without an order.
const unfinishedSelect = `SELECT {K}, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), {NOW} FROM {T}
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}`

// The Resumer's back-off after a request it failed to finish: it leaves
// the request alone for resumeBackoffBase after the first failure, twice as
// long after each next one, and never longer than resumeBackoffMax. The
// request's client may retry it meanwhile, as ever.
const (
	resumeBackoffBase = 10 * time.Second
	resumeBackoffMax  = 15 * time.Minute
)

// The database clocks of the built-in dialects, in microseconds since the
// Unix epoch. Each is read when the statement runs, not fixed for the
// transaction: a phase's commit sets its lease from the moment of its last
// statement. PostgreSQL's now() is the transaction's start, so it is
// clock_timestamp(). MySQL's UTC_TIMESTAMP(6) is the statement's start, in
// UTC, so that no time zone or change of daylight saving time moves a
// lease, as SYSDATE's local time would. SQLite's is the host's clock, to
// the millisecond, which every process on the host shares.
const (
	postgresClock = `(extract(epoch from clock_timestamp()) * 1000000)::bigint`
	mysqlClock    = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`
	sqliteClock   = `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`
)

func (postgres) stepStatements(table string) stepSQL {
	t, _ := quoteTable(table, '"')
	s := stepTemplate(t, "key", postgresClock, "LEAST", "GREATEST")
	key := `({lock_id}::bigint # ('` + t + `'::regclass::oid::bigint << 32))`
	s.lock = `SELECT pg_advisory_xact_lock` + key
	s.tryLock = `SELECT pg_try_advisory_xact_lock` + key
	return s
}

func (sqlite) stepStatements(table string) stepSQL {
	t, _ := quoteTable(table, '"')
	return stepTemplate(t, "key", sqliteClock, "min", "max")
}

func (mysqlFamily) stepStatements(table string) stepSQL {
	t, _ := quoteTable(table, '`')
	s := stepTemplate(t, "`key`", mysqlClock, "LEAST", "GREATEST")
	// A plain read sees the transaction's snapshot, which TiDB takes at
	// BEGIN: it would miss a record committed after it, which the claim
	// before it, a locking read, saw and locked. Locking, it reads the
	// latest. It waits for nothing: the claim holds the row already, or
	// lost it to a phase that runs, and the read then fails at once.
	s.progress += " FOR UPDATE NOWAIT"
	return s
}

// stepStatements are the bound statements of stepSQL.
type stepStatements struct {
	lock, tryLock, start, progress, takeover, advance, mark, renew, finish, release statement
	unfinished, resumable, backoff                                                  statement
}

// bindSteps binds the statements of multi-step requests for d, or returns
// nil when d has none.
func bindSteps(d Dialect, table string) (*stepStatements, error) {
	sd, ok := d.(stepDialect)
	if !ok {
		return nil, nil
	}
	q := sd.stepStatements(table)
	var s stepStatements
	response := []param{paramKey, paramToken, paramPhase, paramStatus, paramHeader, paramBody, paramChecksum, paramExpiresAt}
	for _, b := range []struct {
		dst    *statement
		what   string
		sql    string
		params []param
	}{
		{&s.lock, "step lock", q.lock, []param{paramLockID}},
		{&s.tryLock, "step try lock", q.tryLock, []param{paramLockID}},
		{&s.start, "step start", q.start, []param{paramKey, paramToken, paramPhase, paramLease, paramClockOffset, paramExpiresAt}},
		{&s.progress, "step progress", q.progress, []param{paramKey, paramClockOffset}},
		{&s.takeover, "step takeover", q.takeover, []param{paramKey, paramToken, paramPrevToken, paramLease, paramClockOffset}},
		{&s.advance, "step advance", q.advance, []param{paramKey, paramToken, paramPrevToken, paramLease, paramClockOffset}},
		{&s.mark, "step mark", q.mark, []param{paramKey, paramToken, paramPhase, paramLease, paramClockOffset}},
		{&s.renew, "step renew", q.renew, []param{paramKey, paramToken, paramLease, paramClockOffset}},
		{&s.finish, "step finish", q.finish, response},
		{&s.release, "step release", q.release, []param{paramKey, paramToken, paramPrevToken, paramClockOffset}},
		{&s.unfinished, "unfinished", q.unfinished, []param{paramExpiresAt, paramCreatedAt, paramLimit, paramClockOffset}},
		{&s.resumable, "resumable", q.resumable, []param{paramExpiresAt, paramCreatedAt, paramLimit, paramClockOffset}},
		{&s.backoff, "resume backoff", q.backoff, []param{paramKey, paramClockOffset}},
	} {
		if b.sql == "" {
			continue
		}
		st, err := bind(d, b.what, b.sql, b.params...)
		if err != nil {
			return nil, err
		}
		*b.dst = st
	}
	return &s, nil
}

func init() {
	testhook.LeaseClock = func(offset func() time.Duration) any {
		return Option(func(c *config) error {
			c.leaseClock = offset
			return nil
		})
	}
}

// dbClockOffset is what the statements of leases add to the database's
// clock, in microseconds: 0 but in tests (internal/testhook).
func (s *Store) dbClockOffset() int64 {
	if s.leaseClock == nil {
		return 0
	}
	return s.leaseClock().Microseconds()
}
