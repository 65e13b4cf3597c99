// Package dialect is the contract between an idem Store and one database
// family: the SQL of the Store's statements on its table, and what the
// database's errors mean. The built-in dialects live here, one file per
// database (PostgreSQL, SQLite, and the MySQL family with a small file for
// each of MariaDB's and TiDB's differences), written against the same
// exported types that a dialect outside this module uses: a dialect for
// another database implements Dialect in a package of its own, and
// idemtest.TestDialect checks it against the contract of Do and Run.
//
// Services rarely import this package: idem.Postgres, idem.MySQL and the
// other constructors of package idem return these dialects.
package dialect

import (
	"context"
	"time"

	"github.com/idemgo/idem/driver"
)

// Dialect is what a Store needs to know about one database family. A Store
// calls Schema and Statements once, in idem.New; Placeholder when it binds
// statements, in New and for each batch of a purge; Upgrades in every
// Migrate; and Classify for every error a statement returns.
type Dialect interface {
	// Name is a short lower-case name for messages, such as "postgres".
	Name() string

	// Placeholder returns the bind marker of the n-th argument of a
	// statement, counting from 1: "$1" or "?". When it returns the same
	// marker for every n, arguments are bound in order of appearance and
	// a parameter used twice is bound twice.
	Placeholder(n int) string

	// Schema returns the statements that create the table and its index on
	// expires_at if they are missing, and whatever else the dialect's
	// statements need beside the table. Running them again must do
	// nothing. The columns are described in the documentation of
	// Statements.
	Schema(table string) []string

	// Upgrades returns the changes that bring a table made by an earlier
	// version of the dialect's Schema up to date, in order; nil when
	// there are none. Migrate applies each whose Check counts nothing.
	Upgrades(table string) []Upgrade

	// Statements returns the statements a Store runs against table. The
	// table name has been validated (see idem.WithTable); quote it as the
	// database requires (QuoteTable). lockTimeout is the value of
	// idem.WithLockTimeout, for dialects whose claim waits for a held key
	// itself. A claim must leave no setting behind on the session: a
	// context that ends between two statements rolls the transaction back
	// and returns the connection to its pool before a later statement
	// could undo the first.
	Statements(table string, lockTimeout time.Duration) Statements

	// Classify tells what an error returned by one of the dialect's
	// statements, by a statement of Schema or Upgrades, or by a
	// transaction's Begin or Commit, means to a Store.
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
	// idem.ErrRetry and DoTx runs the transaction again.
	ErrorRetry

	// ErrorLockTimeout is a lock wait on the key that timed out, leaving
	// the transaction usable (the statement alone was undone). It means
	// another transaction holds the key: Do answers InFlight.
	ErrorLockTimeout

	// ErrorExists is the error of a statement of Schema or Upgrades
	// whose table, index, column or other object another caller made
	// meanwhile: a duplicate column, an object that already exists, or a
	// unique violation in the database's catalog. Several services that
	// start at once run Migrate at once, and no server makes the check
	// and the creation of IF NOT EXISTS atomic; Migrate then looks again
	// instead of failing. For any other statement it counts as
	// ErrorOther.
	ErrorExists

	// ErrorMissingColumn is the error of a statement that names a column
	// that the table lacks: a table made by an earlier version and not
	// migrated, or one made without the shard column of a Store with
	// idem.WithShardColumn. The Store names the migration that adds it.
	ErrorMissingColumn
)

// Upgrade is one change to a table made by an earlier version of a
// dialect's Schema: Check counts what the change adds, in one row of one
// number (0 when it is missing), and Apply makes it. Looking first keeps
// Migrate from taking the table's lock for nothing, and from failing where
// the database has no ADD COLUMN IF NOT EXISTS.
type Upgrade struct{ Check, Apply string }

// Hinter is an optional interface of a Dialect: Hint says, in a few words
// for an operator, what an error of the dialect's statements most likely
// means, such as a server that is not the one the dialect is for, or a
// step of the set-up that was missed; "" when it has nothing to add. A
// Store adds the hint to the error it returns.
type Hinter interface {
	Hint(err error) string
}

// Capabilities tells a Store's users what they cannot read in a dialect's
// statements: how its database behaves when several transactions want the
// same key. idemtest.TestDialect reads them to know which properties apply.
// A dialect declares them with a method
//
//	Capabilities() dialect.Capabilities
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

	// ShardedByKey is true when the table is sharded by its key on a
	// database that refuses a transaction that touches more than one
	// shard, as Vitess's vtgate does with transaction_mode SINGLE. A
	// transaction that claims a key may then read and write only rows on
	// that key's shard, and a statement on the whole table, such as
	// Purge's, is refused in a transaction, unless the dialect is a
	// ShardTargeter, whose Purge runs on each shard in turn: the
	// properties of idemtest.TestDialect that read or write elsewhere in
	// the claim's transaction keep to the key's shard, or skip, saying
	// why.
	ShardedByKey bool

	// MaxPurgeBatch is the most expired records that one transaction of
	// Purge takes, whatever batch its caller asks for; 0 sets no bound.
	// A purge that locks each record of its batch in the server's shared
	// lock table, as PostgreSQL's advisory locks are, would fail when a
	// large batch fills it; Purge then runs more, smaller batches.
	MaxPurgeBatch int

	// ReadsUncommitted is true when a session may be set to read rows
	// that other transactions have not committed (READ UNCOMMITTED), as
	// MySQL's and MariaDB's may, by the server's or the data source's
	// setting. A read of a record outside any transaction then runs in a
	// read-only transaction at READ COMMITTED (driver.CommittedReader), so
	// that the Store never answers from a record that its writer may
	// still roll back.
	ReadsUncommitted bool

	// KeepsIsolation is true when a transaction's isolation level stays
	// the session's after the transaction ends, as Vitess's vtgate keeps
	// it. A read outside any transaction cannot then choose its own level
	// without changing the session's for the caller's later transactions,
	// so the Store refuses to begin a transaction at READ UNCOMMITTED,
	// which would leave the session reading rows that other transactions
	// have not committed.
	KeepsIsolation bool
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
// table is a name that idem.WithTable accepted, as the Store was given it.
// q sends the statements, as it sends the Store's own: a database outside
// any transaction, or a transaction.
type TableInspector interface {
	// TableExists reports whether the table is there.
	TableExists(ctx context.Context, q driver.Tx, table string) (bool, error)

	// TableSize returns how many bytes the table and its indexes take,
	// and says how the database measured them.
	TableSize(ctx context.Context, q driver.Tx, table string) (size int64, how string, err error)
}

// The built-in dialects give hints.
var (
	_ Hinter = postgres{}
	_ Hinter = mysql{}
	_ Hinter = mariadb{}
	_ Hinter = tidb{}
	_ Hinter = vitess{}
	_ Hinter = sqlite{}
)
