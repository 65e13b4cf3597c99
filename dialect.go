package idem

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dialect is what a Store needs to know about one database family: the SQL
// of its statements and the meaning of its errors. The built-in dialects are
// Postgres, MySQL and SQLite; a dialect for another database implements this
// interface outside the package, and the idemtest package checks it against
// the contract of Do.
//
// A Store calls Placeholder, Schema and Statements once, in New, and Classify
// for every error a statement returns.
type Dialect interface {
	// Name is a short lower-case name for messages, such as "postgres".
	Name() string

	// Placeholder returns the bind marker of the n-th argument of a
	// statement, counting from 1: "$1" or "?". When it returns the same
	// marker for every n, arguments are bound in order of appearance and
	// a parameter used twice is bound twice.
	Placeholder(n int) string

	// Schema returns the statements that create the table and its index on
	// expires_at if they are missing. Running them again must do nothing.
	// The columns are described in the documentation of Statements.
	Schema(table string) []string

	// Statements returns the statements a Store runs against table. The
	// table name has been validated (see WithTable); quote it as the
	// database requires. lockTimeout is the value of WithLockTimeout, for
	// dialects whose claim waits for a held key itself. A claim must leave
	// no setting behind on the session: a context that ends between two
	// statements rolls the transaction back and returns the connection to
	// its pool before a later statement could undo the first.
	Statements(table string, lockTimeout time.Duration) Statements

	// Classify tells what an error returned by one of the dialect's
	// statements, or by a transaction's Begin or Commit, means to a Store.
	Classify(err error) ErrorKind
}

// ErrorKind is the meaning of a database error to a Store, as reported by
// Dialect.Classify.
type ErrorKind int

const (
	// ErrorOther is any error that is neither of the kinds below. Do
	// returns it unchanged.
	ErrorOther ErrorKind = iota

	// ErrorRetry is a conflict that the transaction cannot survive: a
	// serialization failure, a deadlock, a busy database. Do wraps it in
	// ErrRetry and DoTx runs the transaction again.
	ErrorRetry

	// ErrorLockTimeout is a lock wait on the key that timed out, leaving
	// the transaction usable (the statement alone was undone). It means
	// another transaction holds the key: Do answers InFlight.
	ErrorLockTimeout
)

// Statements holds a dialect's SQL for one table.
//
// The table has these columns (the types are the dialect's):
//
//	key           the idempotency key, bytes compared byte for byte; primary key
//	request_hash  the request hash, bytes
//	created_at    when the key was claimed, microseconds since the Unix epoch
//	expires_at    when the record stops counting, in the same unit; indexed
//	status        the stored response's status; NULL until the claim completes
//	header        the stored response's header, in idem's own encoding
//	body          the stored response's body
//	checksum      the checksum of the stored response
//	token         the claim that wrote the record, a nonzero number; 0 in
//	              records written before the column existed
//	phase         for a multi-step request (Store.Run), its recovery point:
//	              the last step committed; NULL in Do's records
//	lease_until   for a multi-step request, until when its runner owns it,
//	              in microseconds since the Unix epoch by the database's
//	              clock; NULL in Do's records
//	resume_backoff for a multi-step request that a Resumer failed to
//	              finish, how long after lease_until the Resumer leaves it
//	              alone, in microseconds; NULL until then
//
// No statement of a dialect's reads or writes phase, lease_until and
// resume_backoff; the built-in dialects have statements of their own for
// Run and the Resumer. A dialect may add
// columns of its own.
//
// Parameters are written {name} in the SQL, and New replaces them with the
// dialect's placeholders. The parameters are {key}, {request_hash},
// {created_at}, {expires_at}, {status}, {header}, {body}, {checksum}, {now}
// and {limit}, the column values or the moment and batch size of a purge;
// {keys}, the keys of one batch of a purge, one placeholder each;
// {token}, the number of one claim, unique to it; and {lock_id}, a 64-bit
// number derived from the key, the same in every process (a dialect whose
// locks are shared by several tables mixes the table in itself, as the
// Postgres dialect does with the table's OID).
//
// Record columns, where a statement returns a record, are, in this order:
// request_hash, status, header, body, checksum, created_at, expires_at,
// token.
//
// Complete and Abandon are guarded by the claim: they change a record only
// if its token is the {token} of this call's claim. A transaction can end
// under a Store's feet: the MySQL family rolls back the whole transaction of
// a deadlock victim or of a snapshot conflict, SQLite does so for an
// interrupted statement, and a Func may commit or roll back tx by mistake. The *sql.Tx then goes on in
// autocommit, and a duplicate request may meanwhile have claimed the key and
// committed its own record. An unguarded Complete would overwrite that
// record with a response whose effect was rolled back, and an unguarded
// Abandon would delete it, so that the next retry runs the effect a second
// time. The guard makes both statements affect no row instead, which tells
// the Store that its claim is gone.
type Statements struct {
	// Claim is the claim-or-lose statement. When ClaimWrite is set, it
	// only reads what ClaimWrite did (see there). Otherwise it inserts
	// the record {key} with {request_hash}, {created_at}, {expires_at} and
	// {token}, or, where the dialect can, takes over a record that has
	// expired ({created_at} is at or past its expires_at). It returns two
	// columns, claimed and
	// busy, then the record columns, in at most one row:
	//   - claimed true, with the record it wrote, when it inserted or took over;
	//   - claimed false, with the existing record as the statement sees it;
	//   - busy true, when another transaction holds the key and the
	//     statement did not wait for it (the record columns may be NULL);
	//     Do then runs Claim again until the lock timeout passes;
	//   - no row, when it lost but cannot see the winner, or when it
	//     returns rows only for what it wrote; Do runs ClaimLost, where
	//     the dialect has one, and Lookup otherwise;
	//   - no row, when it inserted the record and ClaimedWithoutRow is set.
	// A claim that waits for a held key and times out returns an error
	// that Classify reports as ErrorLockTimeout.
	Claim string

	// ClaimedWithoutRow says that Claim returns no row when it inserted
	// the record, and its row, as above, only when it found one there: a
	// claim in a stored procedure, which sends a result only when there is
	// a record to show, as MySQL's does.
	ClaimedWithoutRow bool

	// ClaimLost is for a Claim that returns a row only when it claims,
	// which a database can plan and run as cheaply as a plain INSERT.
	// It runs when Claim returned no row, and answers as Claim does
	// (claimed false), in one row: busy, when another transaction holds
	// {key}, and the record as the transaction sees it, NULL when there
	// is none. It must not wait for the transaction that holds the key.
	// It binds {key} and may bind {lock_id}. Leave it empty when Claim
	// returns the record it lost to, or when Lookup can tell the rest:
	// a key without a record is then claimed again at once.
	ClaimLost string

	// ClaimWrite is for a database whose INSERT cannot return rows, such as
	// MySQL. It inserts the record {key} with {request_hash},
	// {created_at}, {expires_at} and {token}, or takes over an expired one,
	// and leaves a live record as it is, waiting no longer than the
	// Store's lock timeout for a transaction that holds the key, a bound
	// that it sets for itself alone. When it is set, the Store runs it
	// before Claim, which then only reads the record of {key}, locked
	// until the transaction ends and as last committed whatever the
	// transaction's snapshot: claimed is true when the record carries
	// {token}, busy is false. Leave it empty when Claim writes.
	ClaimWrite string

	// Takeover replaces an expired record {key} with {request_hash},
	// {created_at}, {expires_at} and {token}, clearing the response, provided it
	// is still expired at {created_at}. One affected row means the key is
	// this transaction's. Leave it empty when Claim takes over expired
	// records itself.
	Takeover string

	// Lookup returns the record columns of {key}, or no row.
	Lookup string

	// Complete stores {status}, {header}, {body} and {checksum} in the
	// record {key} whose token is {token}, the record this transaction
	// claimed, affecting one row; no row when the claim is gone (see
	// above why).
	Complete string

	// Abandon deletes the record {key} whose token is {token}, when the
	// claim must store nothing; no row when the claim is gone.
	Abandon string

	// Purge deletes at most {limit} records whose expires_at is at or
	// before {now}, in one statement that Purge runs on its own, outside
	// any transaction. Leave it empty when PurgeSelect and PurgeDelete are
	// set, which take its place. One statement is right for a database
	// that runs one writer at a time, such as SQLite; where writers run
	// concurrently, a delete that meets a record that a claim is taking
	// over waits for that claim while it holds the records it has already
	// deleted, and new requests with their keys wait for it in turn, up
	// to their lock timeout (docs/failure-modes.md).
	Purge string

	// PurgeSelect and PurgeDelete purge one batch in two statements, in a
	// transaction of its own; set both or neither. PurgeSelect returns
	// one column, the key, of at most {limit} records whose expires_at is
	// at or before {now}, oldest first, and locks them, skipping the
	// records that another transaction holds (FOR UPDATE SKIP LOCKED) so
	// that it waits for no claim. Where the database cannot skip, it
	// waits no longer than a bound of its own; a wait that times out
	// gives the batch up, and
	// Purge returns ErrRetry. PurgeDelete deletes the records among
	// {keys}, a list of keys that the Store binds one placeholder each
	// (IN ({keys})), whose expires_at is still at or before {now}: the
	// check keeps a record that was taken over after PurgeSelect read it,
	// where PurgeSelect did not lock it, and RowsAffected counts what it
	// deleted.
	PurgeSelect, PurgeDelete string
}

// param names one value a statement can bind.
type param uint8

const (
	paramKey param = iota
	paramRequestHash
	paramCreatedAt
	paramExpiresAt
	paramStatus
	paramHeader
	paramBody
	paramChecksum
	paramNow
	paramLimit
	paramToken
	paramLockID
	paramKeys
	// The parameters of multi-step requests (steps_sql.go), which no
	// Statements field binds.
	paramPhase
	paramLease
	paramClockOffset
	paramPrevToken
)

// paramNames are the names of the parameters in SQL, as {name}.
var paramNames = [...]string{
	paramKey:         "key",
	paramRequestHash: "request_hash",
	paramCreatedAt:   "created_at",
	paramExpiresAt:   "expires_at",
	paramStatus:      "status",
	paramHeader:      "header",
	paramBody:        "body",
	paramChecksum:    "checksum",
	paramNow:         "now",
	paramLimit:       "limit",
	paramToken:       "token",
	paramLockID:      "lock_id",
	paramKeys:        "keys",
	paramPhase:       "phase",
	paramLease:       "lease",
	paramClockOffset: "clock_offset",
	paramPrevToken:   "prev_token",
}

func paramByName(name string) (param, bool) {
	for p, n := range paramNames {
		if n == name {
			return param(p), true
		}
	}
	return 0, false
}

// values holds everything a statement may bind.
type values struct {
	key, requestHash       []byte
	createdAt, expiresAt   int64
	status                 int64
	header, body, checksum []byte
	now                    int64
	limit                  int64
	token, lockID          int64
	keys                   [][]byte // the batch of a purge, for {keys}
	phase                  string   // a multi-step request's recovery point
	lease, prevToken       int64    // its lease's length, and the token it takes over
	clockOffset            int64    // added to the database's clock (internal/testhook)

	// argBuf holds the arguments of the statement being sent, which
	// database/sql copies before the call returns, and keyArg the key
	// boxed once for all the statements of a call.
	argBuf [8]any
	keyArg any
}

func (v *values) get(p param) any {
	switch p {
	case paramKey:
		if v.keyArg == nil {
			v.keyArg = v.key
		}
		return v.keyArg
	case paramRequestHash:
		return v.requestHash
	case paramCreatedAt:
		return v.createdAt
	case paramExpiresAt:
		return v.expiresAt
	case paramStatus:
		return v.status
	case paramHeader:
		return v.header
	case paramBody:
		return v.body
	case paramChecksum:
		return v.checksum
	case paramNow:
		return v.now
	case paramLimit:
		return v.limit
	case paramToken:
		return v.token
	case paramPhase:
		return v.phase
	case paramLease:
		return v.lease
	case paramClockOffset:
		return v.clockOffset
	case paramPrevToken:
		return v.prevToken
	default:
		return v.lockID
	}
}

// statement is one SQL text with its {name} parameters replaced by
// placeholders, and the values to bind, in order.
type statement struct {
	query  string
	params []param
}

func (s *statement) uses(p param) bool { return contains(s.params, p) }

func (s *statement) args(v *values) []any {
	args := v.argBuf[:0]
	k := 0
	for _, p := range s.params {
		if p == paramKeys {
			args = append(args, v.keys[k])
			k++
			continue
		}
		args = append(args, v.get(p))
	}
	return args
}

// bind replaces the {name} parameters of sql with d's placeholders. Only the
// names in allowed may appear: a dialect that binds something a statement
// does not provide fails in New, not at run time. A {keys} list becomes
// one placeholder.
func bind(d Dialect, what, sql string, allowed ...param) (statement, error) {
	return bindList(d, what, sql, 1, allowed...)
}

// bindList is bind with {keys} replaced by n placeholders, separated by
// commas, each bound to one key of values.keys in turn.
func bindList(d Dialect, what, sql string, n int, allowed ...param) (statement, error) {
	numbered := d.Placeholder(1) != d.Placeholder(2)
	var (
		b      strings.Builder
		params []param
		seen   = map[param]int{}
	)
	for {
		i := strings.IndexByte(sql, '{')
		if i < 0 {
			b.WriteString(sql)
			break
		}
		j := strings.IndexByte(sql[i:], '}')
		name := ""
		if j > 0 {
			name = sql[i+1 : i+j]
		}
		p, known := paramByName(name)
		switch {
		case known:
		case isIdent(name):
			return statement{}, fmt.Errorf("%w: %s dialect: %s statement binds unknown parameter {%s}", ErrInvalidArgument, d.Name(), what, name)
		default: // a brace that is not a parameter
			b.WriteString(sql[:i+1])
			sql = sql[i+1:]
			continue
		}
		if !contains(allowed, p) {
			return statement{}, fmt.Errorf("%w: %s dialect: %s statement cannot bind {%s}", ErrInvalidArgument, d.Name(), what, name)
		}
		b.WriteString(sql[:i])
		if p == paramKeys {
			for k := range n {
				if k > 0 {
					b.WriteString(", ")
				}
				params = append(params, p)
				b.WriteString(d.Placeholder(len(params)))
			}
			sql = sql[i+j+1:]
			continue
		}
		if n, ok := seen[p]; ok && numbered {
			b.WriteString(d.Placeholder(n))
		} else {
			params = append(params, p)
			seen[p] = len(params)
			b.WriteString(d.Placeholder(len(params)))
		}
		sql = sql[i+j+1:]
	}
	return statement{query: b.String(), params: params}, nil
}

func contains(ps []param, p param) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// NumberedPlaceholder returns prefix followed by n, such as "$3" or "?3": the
// Placeholder of a dialect whose markers are numbered.
func NumberedPlaceholder(prefix string, n int) string {
	return prefix + strconv.Itoa(n)
}

// QuoteTable quotes a table name that WithTable accepted, for the Schema and
// Statements of a dialect: each part of a schema-qualified name is quoted on
// its own with quote, so that "app.keys" becomes "app"."keys" with a double
// quote and `app`.`keys` with a backquote. Quoting keeps a name that is a
// reserved word (a table called "order") from breaking the SQL, and keeps the
// case of the name where the database folds unquoted names.
func QuoteTable(table string, quote byte) string {
	quoted, _ := quoteTable(table, quote)
	return quoted
}

// Capabilities tells a Store's users what they cannot read in a dialect's
// statements: how its database behaves when several transactions want the
// same key. idemtest.TestDialect reads them to know which properties apply.
// A dialect declares them with a method
//
//	Capabilities() idem.Capabilities
//
// and one without that method has the zero Capabilities, those of a database
// that runs writers concurrently, as PostgreSQL and MySQL do.
type Capabilities struct {
	// OneWriter is true when the database runs one writing transaction
	// at a time, as SQLite does: a second writer waits at BEGIN (or fails
	// there), so a claim never meets a key that another transaction
	// holds, never waits for one, and no two claims race.
	OneWriter bool

	// ConflictAtCommit is true when a claim neither waits for nor sees a
	// key that another transaction holds uncommitted, and the database
	// settles the race at commit instead, as TiDB does in its optimistic
	// transaction mode: every claimer wins, each fn runs, and all
	// commits but the first fail with a conflict that Classify reports as
	// ErrorRetry, undoing their claims and effects. No claim answers
	// InFlight, and fn may run for one key in several transactions at
	// once, of which one commits: such a fn must keep to the database.
	// A dialect whose database can run either way, such as TiDB's,
	// declares the way it runs by default; a test of the other way
	// declares it with a dialect that embeds it.
	ConflictAtCommit bool

	// MinLockWait is the shortest wait for a held key that the database
	// may insist on: a claim may wait this long before it answers
	// InFlight, whatever the lock timeout, also a zero one. It is 1 s for
	// the MySQL and TiDB dialects, since MySQL and TiDB accept no
	// innodb_lock_wait_timeout below 1 s.
	MinLockWait time.Duration
}

// CapabilitiesOf returns the Capabilities that d declares.
func CapabilitiesOf(d Dialect) Capabilities {
	if c, ok := d.(interface{ Capabilities() Capabilities }); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// TableInspector is an optional interface of a Dialect, for tools that look
// at a Store's table from outside, such as the idem command: it says whether
// the table exists and how much room it takes, questions that every
// database answers from its own catalog. The built-in dialects implement it.
// table is a name that WithTable accepted, as the Store was given it.
type TableInspector interface {
	// TableExists reports whether the table is there.
	TableExists(ctx context.Context, q Querier, table string) (bool, error)

	// TableSize returns how many bytes the table and its indexes take,
	// and says how the database measured them.
	TableSize(ctx context.Context, q Querier, table string) (size int64, how string, err error)
}

// takeoverTemplate is the Takeover of the built-in dialects that take over
// an expired record in a statement of their own, with key, the key column
// as the dialect quotes it, and {T} for the table.
func takeoverTemplate(key string) string {
	return `UPDATE {T} SET request_hash = {request_hash}, created_at = {created_at}, expires_at = {expires_at},
	token = {token}, status = NULL, header = NULL, body = NULL, checksum = NULL
WHERE ` + key + ` = {key} AND expires_at <= {created_at}`
}
