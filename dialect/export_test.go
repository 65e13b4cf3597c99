package dialect

// PostgresPairLock is the SQL of the lock number of a record of a table with
// a shard column of kind, over the columns shard_key and key, as the
// PostgreSQL dialect's Purge derives it.
func PostgresPairLock(kind ShardKind) string {
	return postgresKeyLock(keying{k: "key", shard: postgresShardType(kind), shardLock: postgresShardLock(kind)})
}

// PostgresShardType is the type of a shard column of kind on PostgreSQL.
func PostgresShardType(kind ShardKind) string { return postgresShardType(kind) }
