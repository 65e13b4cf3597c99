package idem

import "github.com/idemgo/idem/dialect"

// This file holds the built-in dialects of the MySQL family (MySQL, MariaDB,
// TiDB, and MySQL behind Vitess), as services take them, and what they
// need to know of each; their SQL is in package dialect.

// MySQL returns the dialect of MySQL 8.0.29 or later with InnoDB, for
// github.com/go-sql-driver/mysql. It also runs on MariaDB 10.6 or later,
// where MariaDB claims in one statement without a procedure; on TiDB, which
// has no stored procedures, use TiDB. The three use the same table.
//
// MySQL bounds a row lock wait only for a whole session: it ignores a
// SET_VAR hint for innodb_lock_wait_timeout, and an INSERT has no NOWAIT. A
// claim must wait a bounded time for a key that another transaction holds,
// and a bound set for the session in a statement of its own would outlive
// the claim whenever the caller's context ended before the statement that
// puts it back, since database/sql then rolls the transaction back and
// hands the connection to its pool with the Store's bound. So the claim is
// one statement, CALL of a procedure that Migrate creates beside the table
// (the table's name with _claim2 appended). The procedure sets the
// session's innodb_lock_wait_timeout to the Store's lock timeout, rounded
// up to whole seconds (InnoDB counts no finer), where the session's own
// differs; inserts the record with INSERT ... ON DUPLICATE KEY UPDATE,
// which leaves a record that is there as it is; puts the session's own
// timeout back, also when the insert fails; and, only when it found a
// record there, takes it over if it has expired and sends it, read FOR
// UPDATE so that it is the latest committed one whatever the transaction's
// snapshot. A claim that is cut
// off mid-statement closes its connection, which the pool then drops.
// The procedure runs with the caller's privileges (SQL SECURITY INVOKER),
// which must include EXECUTE.
//
// A procedure that changes gets a new name, and Migrate keeps creating the
// ones before it as they were: during a rolling upgrade, binaries of
// earlier versions call theirs, on the same table, beside binaries of this
// one. The first, the table's name with _claim appended, wrote no
// incarnation; the records it creates hold 0 there.
//
// The claim takes an exclusive lock on an existing record until the caller's
// transaction ends, also when it only replays, so a concurrent replay of the
// same key may wait up to the lock timeout. Keys and hashes are compared
// byte for byte (VARBINARY), whatever the collation. The server must keep
// innodb_rollback_on_timeout off, its default, so that a lock wait timeout
// undoes the claim and not the caller's transaction. Deadlocks (1213) and
// MariaDB's innodb_snapshot_isolation conflicts (1020) roll back the whole
// transaction and are returned as ErrRetry; the *sql.Tx then runs in
// autocommit, which is why Complete and Abandon are guarded by the claim's
// token. A claim that waited in vain answers InFlight, at every isolation
// level.
func MySQL() Dialect { return dialect.MySQL() }

// MariaDB returns the dialect of MariaDB 10.5 or later with InnoDB, for
// github.com/go-sql-driver/mysql. Its claim is one statement with no stored
// procedure, because it relies on two features of MariaDB that MySQL and
// TiDB lack, INSERT ... RETURNING and SET STATEMENT: on those, use MySQL or
// TiDB. MySQL also runs on MariaDB; the three use the same table.
//
// The claim is one INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING that
// inserts the record or returns the record that is there, under a
// per-statement innodb_lock_wait_timeout of the Store's lock timeout
// rounded up to whole seconds (MariaDB counts no finer); a second statement
// takes over an expired record. The claim reads the latest committed record
// even inside a REPEATABLE READ transaction that read the table before.
//
// The claim takes an exclusive lock on an existing record until the caller's
// transaction ends, also when it only replays, so a concurrent replay of the
// same key may wait up to the lock timeout. Keys and hashes are compared
// byte for byte (VARBINARY), whatever the collation. The server must keep
// innodb_rollback_on_timeout off, its default, so that a lock wait timeout
// undoes the claim and not the caller's transaction. Deadlocks (1213) and
// innodb_snapshot_isolation conflicts (1020) roll back the whole transaction
// and are returned as ErrRetry; the *sql.Tx then runs in autocommit, which
// is why Complete and Abandon are guarded by the claim's token. A claim that
// waited in vain answers InFlight, at every isolation level.
func MariaDB() Dialect { return dialect.MariaDB() }

// TiDB returns the dialect of TiDB, for github.com/go-sql-driver/mysql. It
// uses the table of MySQL and MariaDB.
//
// TiDB bounds a lock wait for one statement, through the optimizer hint
// SET_VAR(innodb_lock_wait_timeout = n), so no claim changes the session.
// The claim is two statements: INSERT ... ON DUPLICATE KEY UPDATE, under
// the Store's lock timeout rounded up to whole seconds, which inserts the
// record, takes over an expired one and leaves a live one as it is; then
// SELECT ... FOR UPDATE, which reads the record that the insert locked, as
// last committed. The record is this claim's when it carries the claim's
// token. Keys and hashes are compared byte for byte (VARBINARY).
//
// Run idem's transactions in TiDB's pessimistic mode, its default, where a
// claim waits for a held key. In optimistic mode a claim sees no key that
// another transaction holds uncommitted: both claims win, both Funcs run,
// and the second commit fails with a write conflict (9007), which Do and
// DoTx treat as ErrRetry (see dialect.Capabilities.ConflictAtCommit). The key still
// protects the database's effects, but not a Func's calls to other systems.
func TiDB() Dialect { return dialect.TiDB() }

// Vitess returns the dialect of MySQL behind Vitess's vtgate, for
// github.com/go-sql-driver/mysql, on a sharded keyspace whose VSchema shards
// idem's table by its key column, with the xxhash vindex, which hashes
// bytes. It uses the table of MySQL and MariaDB.
//
// vtgate sends each statement of a claim to the one shard of its key, but
// the MySQL dialect's claim cannot go there: vtgate's parser does not take
// the CREATE PROCEDURE of its Migrate, and it refuses CALL on a sharded
// keyspace. Nor does a statement of the claim bound its own lock wait:
// MySQL ignores SET_VAR for innodb_lock_wait_timeout; its
// MAX_EXECUTION_TIME bounds a SELECT alone, and a locking read so bounded
// before the insert makes two claims of one new key deadlock under
// REPEATABLE READ; and Vitess's QUERY_TIMEOUT_MS, once it fires in a
// transaction, kills the shard's connection and with it the writes of the
// caller's transaction so far, whose later statements then commit on their
// own (docs/scaling.md shows each). A SET of the session's
// innodb_lock_wait_timeout around the claim reaches the shard, but would
// outlive the claim as it would on MySQL (see MySQL). So the claim waits
// for a held key as long as the session's innodb_lock_wait_timeout, which
// the service sets once for every connection in its DSN
// (innodb_lock_wait_timeout=1, say): go-sql-driver/mysql sends it when it
// connects, and vtgate applies it on each shard's connection of the
// session. The Store's lock timeout plays no part in the claim.
//
// The claim is TiDB's without its hint, two statements on the key's shard:
// INSERT ... ON DUPLICATE KEY UPDATE, which inserts the record, takes over
// an expired one and leaves a live one as it is, then SELECT ... FOR
// UPDATE, which reads the record that the insert locked, as last
// committed. A request's own statements must go to the same shard as its
// key, or vtgate makes its transaction a multi-shard one: shard the tables
// they write by a column whose vindex maps the request to the key's shard.
//
// A purge's batch reads and locks expired records wherever they are, which
// vtgate with transaction_mode SINGLE refuses in one transaction, so the
// dialect is a ShardTargeter: Purge runs on each shard in turn, on a
// session addressed to it with USE `keyspace/shard`, and there each batch
// is MySQL's, a transaction on that shard alone. Its delete names the
// primary key with an optimizer hint, as vttablet's parser takes no
// FORCE INDEX in a DELETE (docs/scaling.md).
func Vitess() Dialect { return dialect.Vitess() }
