package dialect

import (
	"errors"
	"strings"
)

// This file holds the SQL and the error reading that several built-in
// dialects share; each database's own file holds the rest.

// record lists the record columns, in the order that Statements gives,
// with the incarnation that the built-in dialects write.
const record = recordWithoutIncarnation + `, incarnation`

// recordWithoutIncarnation is record as the statements of earlier versions
// read it, before records had an incarnation: the MySQL dialect's first
// claim procedure, which binaries of those versions still call, reads it.
const recordWithoutIncarnation = `request_hash, status, header, body, checksum, created_at, expires_at, token`

// keying is how the statements of a built-in dialect name a record: by
// its key column alone, or, in a table with a shard column (ShardColumn),
// by shard_key and the key together.
type keying struct {
	k     string // the key column, as the dialect quotes it
	shard string // the SQL type of shard_key; "" in a table without it
	// shardLock is the SQL of shard_key's bytes in its record's lock
	// number, for a dialect whose locks are the Store's (PostgreSQL's).
	shardLock string
}

// match is the condition that finds the record of {key}, with q before
// each column ("p." for a table called p in the statement, or "").
func (kk keying) match(q string) string {
	if kk.shard == "" {
		return q + kk.k + ` = {key}`
	}
	return q + `shard_key = {shard} AND ` + q + kk.k + ` = {key}`
}

// columns lists the columns that name a record, for an INSERT, a SELECT
// list or a conflict target, with q before each column.
func (kk keying) columns(q string) string {
	if kk.shard == "" {
		return q + kk.k
	}
	return q + `shard_key, ` + q + kk.k
}

// values lists the values of columns, each followed by cast, for an
// INSERT: cast is "::bytea" where the database must be told the type of a
// parameter, and then the shard column's value is declared of the
// column's own type, which holds every value of its kind as it is: the
// declaration converts nothing.
func (kk keying) values(cast string) string {
	if kk.shard == "" {
		return `{key}` + cast
	}
	if cast != "" {
		return `{shard}::` + kk.shard + `, {key}` + cast
	}
	return `{shard}, {key}`
}

// in is the condition of a purge's delete on the records of one batch,
// {keys}, with q before each column: a list of keys, or, with a shard
// column, of (shard_key, key) pairs.
func (kk keying) in(q string) string {
	if kk.shard == "" {
		return q + kk.k + ` IN ({keys})`
	}
	return `(` + kk.columns(q) + `) IN ({keys})`
}

// replacer returns the pairs that write {MATCH}, {KCOLS} and {KVALS} (see
// match, columns and values; {KVALS} without a cast).
func (kk keying) replacer() []string {
	return []string{"{MATCH}", kk.match(""), "{KCOLS}", kk.columns(""), "{KVALS}", kk.values("")}
}

// takeoverTemplate is the Takeover of the built-in dialects that take over
// an expired record in a statement of their own, with {T} for the table.
func takeoverTemplate(kk keying) string {
	return `UPDATE {T} SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, incarnation = {incarnation}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE ` + kk.match("") + ` AND expires_at <= {created_at}`
}

// statsTemplate is the Stats of the built-in dialects, with {T} for the
// table: one pass over the table, which judges a record live as Lookup
// does, while its expires_at is after {now}.
const statsTemplate = `SELECT
	COUNT(CASE WHEN expires_at > {now} THEN 1 END),
	COUNT(CASE WHEN expires_at > {now} AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= {now} THEN 1 END),
	MIN(created_at)
FROM {T}`

// countExpiredTemplate is the CountExpired of the built-in dialects, with
// {T} for the table: a range of the index on expires_at.
const countExpiredTemplate = `SELECT COUNT(*) FROM {T} WHERE expires_at <= {now}`

// runTemplate writes the statements of multi-step requests for the quoted
// table t whose records kk names, on a database whose clock, in microseconds
// since the Unix epoch, the expression clock reads, and whose functions of
// the smaller and the larger of two numbers are least and greatest.
func runTemplate(t string, kk keying, clock, least, greatest string) RunStatements {
	r := strings.NewReplacer(append(kk.replacer(), "{T}", t, "{NOW}", "("+clock+" + {clock_offset})",
		"{LEAST}", least, "{GREATEST}", greatest)...)
	const (
		mine       = `{MATCH} AND token = {token} AND status IS NULL`
		lease      = `lease_until = {NOW} + {lease}`
		advance    = `UPDATE {T} SET token = {token}, ` + lease + ` WHERE {MATCH} AND token = {prev_token} AND status IS NULL`
		unfinished = `SELECT {KCOLS}, phase, created_at, lease_until, request_hash, COALESCE(resume_backoff, 0), {NOW}, incarnation FROM {T}
WHERE expires_at = {expires_at} AND status IS NULL AND phase IS NOT NULL AND created_at <= {created_at}`
	)
	return RunStatements{
		Start:      r.Replace(`UPDATE {T} SET phase = {phase}, ` + lease + `, expires_at = {expires_at} WHERE ` + mine),
		Progress:   r.Replace(`SELECT phase, lease_until, token, created_at, {NOW}, incarnation FROM {T} WHERE {MATCH} AND status IS NULL AND phase IS NOT NULL`),
		Takeover:   r.Replace(advance + ` AND phase IS NOT NULL AND lease_until <= {NOW}`),
		Advance:    r.Replace(advance),
		Mark:       r.Replace(`UPDATE {T} SET phase = {phase}, ` + lease + ` WHERE ` + mine),
		Renew:      r.Replace(`UPDATE {T} SET ` + lease + ` WHERE ` + mine),
		Finish:     r.Replace(`UPDATE {T} SET phase = {phase}, status = {status}, header = {header}, body = {body}, checksum = {checksum}, expires_at = {expires_at} WHERE ` + mine),
		Release:    r.Replace(`UPDATE {T} SET lease_until = {NOW} WHERE {MATCH} AND (token = {token} OR token = {prev_token}) AND status IS NULL`),
		Unfinished: r.Replace(unfinished + "\nORDER BY created_at LIMIT {limit}"),
		Resumable:  r.Replace(unfinished + " AND lease_until + COALESCE(resume_backoff, 0) <= {NOW}\nORDER BY created_at LIMIT {limit}"),
		Backoff: r.Replace(`UPDATE {T} SET resume_backoff = {LEAST}({backoff_max}, COALESCE(resume_backoff * 2, {backoff_base})),
lease_until = {GREATEST}(lease_until, {NOW}) WHERE {MATCH} AND status IS NULL AND phase IS NOT NULL`),
	}
}

// family names the database that sent err, by the error types of the
// drivers the built-in dialects serve: "PostgreSQL", "MySQL-family" or
// "SQLite"; "" when err is none of theirs.
func family(err error) string {
	var pg interface{ SQLState() string }
	var lite interface{ Code() int }
	_, _, my := mysqlError(err)
	switch {
	case errors.As(err, &pg):
		return "PostgreSQL"
	case my:
		return "MySQL-family"
	case errors.As(err, &lite):
		return "SQLite"
	}
	return ""
}

// wrongServer is the hint of a built-in dialect for an error that another
// database family sent: the Store was made with the dialect of another
// database than the one it talks to.
func wrongServer(err error, self string) string {
	f := family(err)
	if f == "" || f == self {
		return ""
	}
	use := map[string]string{
		"PostgreSQL":   "idem.Postgres()",
		"MySQL-family": "idem.MySQL(), idem.MariaDB() or idem.TiDB()",
		"SQLite":       "idem.SQLite()",
	}[f]
	return "the error is " + f + "'s, and the dialect is for " + self + ": make the Store with " + use
}

// errorChain lists err and every error it wraps, depth first.
func errorChain(err error) []error {
	var chain []error
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			chain = append(chain, e)
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					walk(inner)
				}
				return
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			default:
				return
			}
		}
	}
	walk(err)
	return chain
}
