package idem

import "strings"

// stepSQL holds the statements of multi-step requests (Store.Run) on one
// table. They use the columns phase and lease_until, which plain records
// leave NULL, and bind the parameters {phase}, {lease_until} and
// {prev_token} besides the Statements' own.
type stepSQL struct {
	// lock, where the dialect has one, waits for the key's lock before a
	// phase changes the record, so that a claim of the same key meanwhile
	// sees the key held instead of waiting for the phase's row.
	lock string
	// start marks the record this transaction just claimed as a
	// multi-step request: its recovery point, its lease, and an expiry
	// that never comes while it is unfinished.
	start string
	// progress reads the recovery point, lease and claim token of an
	// unfinished multi-step request, and when it was created.
	progress string
	// takeover makes the request this call's, with a new token and lease,
	// provided the lease it read has run out and no one took it since.
	takeover string
	// advance, first in a phase's transaction, makes the request the
	// phase's with a new token and renews the lease, provided this call
	// still holds it: its fence. The new token also tells, at the end of
	// the phase, whether the transaction is still the one that began.
	advance string
	// mark moves the recovery point at the end of a phase; no row means
	// that the server ended the transaction under the phase.
	mark string
	// finish stores the final response and the retention from now.
	finish string
	// release ends this call's lease at once, so that a retry need not
	// wait for it to run out. It takes the token of the last phase or
	// the one before, since a commit that failed may or may not have
	// landed.
	release string
	// unfinished lists, oldest first, the unfinished requests created at
	// or before {created_at}. They are the records whose expires_at is
	// never, which the index on expires_at finds.
	unfinished string
}

// stepDialect is implemented by the built-in dialects, whose tables have
// the columns of multi-step requests.
type stepDialect interface {
	stepStatements(table string) stepSQL
}

// stepTemplate writes the statements for the quoted table t and key
// column k.
func stepTemplate(t, k string) stepSQL {
	r := strings.NewReplacer("{T}", t, "{K}", k)
	const (
		mine    = `{K} = {key} AND token = {token} AND status IS NULL`
		advance = `UPDATE {T} SET token = {token}, lease_until = {lease_until} WHERE {K} = {key} AND token = {prev_token} AND status IS NULL`
	)
	return stepSQL{
		start:    r.Replace(`UPDATE {T} SET phase = {phase}, lease_until = {lease_until}, expires_at = {expires_at} WHERE ` + mine),
		progress: r.Replace(`SELECT phase, lease_until, token, created_at FROM {T} WHERE {K} = {key} AND status IS NULL AND phase IS NOT NULL`),
		takeover: r.Replace(advance + ` AND phase IS NOT NULL AND lease_until <= {now}`),
		advance:  r.Replace(advance),
		mark:     r.Replace(`UPDATE {T} SET phase = {phase} WHERE ` + mine),
		finish:   r.Replace(`UPDATE {T} SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE ` + mine),
		release:  r.Replace(`UPDATE {T} SET lease_until = {now} WHERE {K} = {key} AND (token = {token} OR token = {prev_token}) AND status IS NULL`),
		unfinished: r.Replace(`SELECT {K}, phase, created_at, lease_until, request_hash FROM {T}
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}
ORDER BY created_at LIMIT {limit}`),
	}
}

func (postgres) stepStatements(table string) stepSQL {
	t, _ := quoteTable(table, '"')
	s := stepTemplate(t, "key")
	s.lock = `SELECT pg_advisory_xact_lock({lock_id}::bigint # ('` + t + `'::regclass::oid::bigint << 32))`
	return s
}

func (sqlite) stepStatements(table string) stepSQL {
	t, _ := quoteTable(table, '"')
	return stepTemplate(t, "key")
}

func (mysqlFamily) stepStatements(table string) stepSQL {
	t, _ := quoteTable(table, '`')
	return stepTemplate(t, "`key`")
}

// stepStatements are the bound statements of stepSQL.
type stepStatements struct {
	lock, start, progress, takeover, advance, mark, finish, release statement
	unfinished                                                      statement
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
		{&s.start, "step start", q.start, []param{paramKey, paramToken, paramPhase, paramLeaseUntil, paramExpiresAt}},
		{&s.progress, "step progress", q.progress, []param{paramKey}},
		{&s.takeover, "step takeover", q.takeover, []param{paramKey, paramToken, paramPrevToken, paramLeaseUntil, paramNow}},
		{&s.advance, "step advance", q.advance, []param{paramKey, paramToken, paramPrevToken, paramLeaseUntil}},
		{&s.mark, "step mark", q.mark, []param{paramKey, paramToken, paramPhase}},
		{&s.finish, "step finish", q.finish, response},
		{&s.release, "step release", q.release, []param{paramKey, paramToken, paramPrevToken, paramNow}},
		{&s.unfinished, "unfinished", q.unfinished, []param{paramExpiresAt, paramCreatedAt, paramLimit}},
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
