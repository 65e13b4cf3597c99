package dialect

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
//	resume_backoff for a multi-step request that Resume failed to
//	              finish, how long after lease_until Resume leaves it
//	              alone, in microseconds; NULL until then
//	incarnation   which record of its key this is, a nonzero number that
//	              the claim which creates the record writes and nothing
//	              else changes; 0 in records written before the column
//	              existed, NOT NULL DEFAULT 0
//
// Only the statements of Run (RunStatements) read or write phase,
// lease_until and resume_backoff. A dialect may add columns of its own.
//
// Parameters are written {name} in the SQL, and idem.New replaces them with
// the dialect's placeholders; a statement that binds a parameter it cannot
// have fails New. The parameters are {key}, {request_hash},
// {created_at}, {expires_at}, {status}, {header}, {body}, {checksum}, {now}
// and {limit}, the column values or the moment and batch size of a purge;
// {keys}, the keys of one batch of a purge, one placeholder each;
// {shard}, the value of shard_key in a table with a shard column (see
// ShardColumn);
// {token}, the number of one claim, unique to it; {incarnation}, the
// incarnation of the record that a claim creates, random and nonzero; and
// {lock_id}, a 64-bit number derived from the key, the same in every
// process (a dialect whose locks are shared by several tables mixes the
// table in itself, as the Postgres dialect does with a hash of the table's
// schema-qualified name).
//
// Record columns, where a statement returns a record, are, in this order:
// request_hash, status, header, body, checksum, created_at, expires_at,
// token, incarnation.
//
// A record's incarnation tells it from every other record that its key has
// had or will have (idem.Result.Incarnation): the claim that inserts a
// record writes {incarnation}, and so does every statement that takes over
// an expired record, which starts a new request on the key (Claim or
// ClaimWrite where they take over, and Takeover); no other statement
// changes it. A dialect whose claim binds no {incarnation}, as those
// written before incarnations, keeps working: its statements return the
// record columns without incarnation, and Run.Progress, Run.Unfinished and
// Run.Resumable without their last column, and every record reads 0. New
// refuses a dialect whose claim writes an incarnation and whose Takeover
// does not, or the other way round; idemtest.TestDialect holds a dialect to
// writing one.
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
	// Claim is the claim-or-lose statement. When ClaimWrite is set, it only
	// reads what ClaimWrite did (see there). Otherwise it inserts the record
	// {key} with {request_hash}, {created_at}, {expires_at}, {token} and
	// {incarnation}, or, where the dialect can, takes over a record that has
	// expired ({created_at} is at or past its expires_at), with those
	// values. It returns two columns, claimed and busy, then the record
	// columns, in at most one row:
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

	// ClaimHeld is for a database that may run ClaimLost elsewhere than
	// the claim's lock, such as Citus, which runs a read of a distributed
	// table on the worker that holds the row: ClaimLost then reads the
	// record alone (busy false), and ClaimHeld asks, in a statement of
	// its own that reads no table, whether another transaction holds
	// {key}, returning one row of one boolean, true when one does. It
	// must not wait. The Store runs it when ClaimLost found no live
	// record, before it takes an expired record over or claims again. It
	// binds {lock_id}. Leave it empty when ClaimLost tells a held key.
	ClaimHeld string

	// ClaimWrite is for a database whose INSERT cannot return rows, such as
	// MySQL. It inserts the record {key} with {request_hash}, {created_at},
	// {expires_at}, {token} and {incarnation}, or takes over an expired one
	// with those values, and leaves a live record as it is, waiting no
	// longer than the Store's lock timeout for a transaction that holds the
	// key, a bound that it sets for itself alone. When it is set, the Store
	// runs it before Claim, which then only reads the record of {key},
	// locked until the transaction ends and as last committed whatever the
	// transaction's snapshot: claimed is true when the record carries
	// {token}, busy is false. Leave it empty when Claim writes.
	ClaimWrite string

	// Takeover replaces an expired record {key} with {request_hash},
	// {created_at}, {expires_at}, {token} and {incarnation}, clearing the
	// response, provided it is still expired at {created_at}. One affected
	// row means the key is this transaction's. Leave it empty when Claim
	// takes over expired records itself.
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
	// records that another transaction holds (FOR UPDATE SKIP LOCKED, or
	// the claim's own lock of each key, taken without waiting) so that it
	// waits for no claim. Where the database cannot skip, it
	// waits no longer than a bound of its own; a wait that times out
	// gives the batch up, and
	// Purge returns ErrRetry. PurgeDelete deletes the records among
	// {keys}, a list of keys that the Store binds one placeholder each
	// (IN ({keys})), whose expires_at is still at or before {now}: the
	// check keeps a record that was taken over after PurgeSelect read it,
	// where PurgeSelect did not lock it, and RowsAffected counts what it
	// deleted.
	PurgeSelect, PurgeDelete string

	// Stats counts the records as of {now}, for idem.Store.Stats, in one
	// row of four columns: the live records (expires_at after {now}), the
	// live records without a response (status NULL), the expired records
	// (expires_at at or before {now}), and the smallest created_at, NULL
	// when the table is empty. It runs outside any transaction and takes
	// no lock; it may read every row. On a table with a shard column it
	// counts the records of every shard value. Leave it empty where the
	// database cannot count the table in one statement: Stats then
	// returns an error that matches errors.ErrUnsupported.
	Stats string

	// CountExpired counts the records whose expires_at is at or before
	// {now}, what Purge has yet to delete, for idem.Store.CountExpired, in
	// one row of one column, through the index on expires_at, so that it
	// reads the expired records alone. It runs outside any transaction
	// and takes no lock. Leave it empty where the database cannot count
	// them so: CountExpired then returns an error that matches
	// errors.ErrUnsupported.
	CountExpired string

	// Run holds the statements of multi-step requests (idem.Store.Run)
	// and of Resume. A dialect that leaves them all empty has no
	// multi-step requests: Run answers idem.ErrNoSteps, and
	// idemtest.TestDialect skips their properties, saying so.
	Run RunStatements
}

// RunStatements holds the statements of multi-step requests on one table:
// set all of them but Lock and TryLock, which go together, or none. They
// use the columns phase, lease_until and resume_backoff, which Do's
// records leave NULL, and bind, besides the parameters of Statements,
// {phase}, the request's recovery point (the name of its last committed
// step, "" before the first); {lease}, the length of a lease in
// microseconds; {prev_token}, the token that the statement replaces;
// {clock_offset}, microseconds that the statement adds to the database's
// clock, 0 but in tests that move the clock; and {backoff_base} and
// {backoff_max}, Resume's back-off, in microseconds.
//
// Leases run on the database's clock, read in SQL by every statement that
// sets or compares one, so that the app servers' clocks, which may differ
// by minutes, never decide whether a runner is alive: lease_until is in
// microseconds since the Unix epoch by that clock plus {clock_offset}
// (called "the clock" below). Read a clock that moves during the
// transaction, not one fixed at its start: a phase's commit sets its lease
// from the moment of its last statement.
//
// A statement that changes a record affects one row when it did, and none
// when its condition did not hold: the Store reads RowsAffected.
type RunStatements struct {
	// Lock, where the database has locks of its own besides the
	// record's, waits for the lock of {lock_id} before a phase changes the
	// record, so that a claim of the same key meanwhile sees the key held
	// (busy) instead of waiting for the phase's row. TryLock takes the
	// same lock without waiting, and returns one row of one boolean,
	// whether it did: before a takeover, it tells a phase that runs from
	// one that has ended. Leave both empty where the claim waits for the
	// record's lock.
	Lock, TryLock string

	// Start marks the record {key} that this transaction just claimed,
	// whose token is {token} and status NULL, as a multi-step request:
	// phase {phase}, lease_until the clock plus {lease}, and expires_at
	// {expires_at}, a moment that never comes while it is unfinished.
	Start string

	// Progress returns phase, lease_until, token, created_at, the clock and
	// incarnation, of the unfinished multi-step request {key} (status NULL,
	// phase not NULL), in one row, or no row. It reads the latest committed
	// record, without waiting for a transaction that holds it (a wait that
	// fails is classified ErrorLockTimeout), whatever the transaction's
	// snapshot.
	Progress string

	// Takeover makes the unfinished request {key} this call's: token
	// {token} and lease_until the clock plus {lease}, provided its token
	// is still {prev_token} and its lease has run out (lease_until at or
	// before the clock).
	Takeover string

	// Advance, first in a phase's transaction, sets token {token} and
	// lease_until the clock plus {lease} on the unfinished request {key}
	// whose token is {prev_token}: the phase's fence.
	Advance string

	// Mark moves the recovery point of the unfinished request {key}
	// whose token is {token} to {phase}, and sets lease_until to the
	// clock plus {lease}, at the end of a phase.
	Mark string

	// Renew sets lease_until to the clock plus {lease} on the unfinished
	// request {key} whose token is {token}, outside any transaction,
	// while a call to another system runs.
	Renew string

	// Finish stores the final response of the unfinished request {key}
	// whose token is {token}: {status}, {header}, {body} and
	// {checksum}, with phase {phase} and expires_at {expires_at}.
	Finish string

	// Release ends the lease of the unfinished request {key} at once
	// (lease_until the clock), when its token is {token} or {prev_token}.
	Release string

	// Unfinished lists the unfinished requests (expires_at {expires_at},
	// status NULL, phase not NULL) created at or before {created_at},
	// oldest first, at most {limit}: key, phase, created_at, lease_until,
	// request_hash, resume_backoff (0 for NULL), the clock and
	// incarnation. The index on expires_at finds them.
	Unfinished string

	// Resumable is Unfinished without the requests whose lease_until plus
	// resume_backoff is after the clock: those Resume may take.
	Resumable string

	// Backoff notes that Resume failed to finish the unfinished request
	// {key}: resume_backoff doubles, from {backoff_base} to at most
	// {backoff_max}, and lease_until becomes the clock, unless it is
	// later.
	Backoff string
}
