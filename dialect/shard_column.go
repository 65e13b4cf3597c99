package dialect

import "time"

// ShardColumn is an optional interface of a Dialect whose table can carry a
// shard column (idem.WithShardColumn): shard_key, the value that the
// caller's effects are sharded by, such as a customer id, set by the caller
// for each request. On a sharded database, idem's table is then sharded by
// shard_key rather than by key, so that a record lands on the shard of the
// effect it protects and the two commit in one transaction on one shard.
// The built-in dialects implement it.
//
// The table has the columns of Statements and shard_key, NOT NULL, before
// key; its primary key is (shard_key, key), so that a key is claimed once
// for each shard value.
type ShardColumn interface {
	// ShardColumnSchema is Schema for such a table, whose shard_key
	// has the SQL type typ. The sharded database's own step, such as a
	// Vitess VSchema entry or Citus's create_distributed_table, is
	// not among them: an operator runs it once (docs/scaling.md).
	ShardColumnSchema(table, typ string) []string

	// ShardColumnStatements is Statements for such a table. Every
	// statement that binds {key} binds {shard} too, the value of
	// shard_key, and names the record by both; the inserts write it.
	// PurgeSelect returns two columns, shard_key and key, and
	// PurgeDelete's {keys} is a list of (shard_key, key) pairs, each
	// written ({shard}, {key}) by the Store: (shard_key, key) IN
	// ({keys}). Run.Unfinished and Run.Resumable return shard_key
	// before their other columns.
	ShardColumnStatements(table, typ string, lockTimeout time.Duration) Statements
}
