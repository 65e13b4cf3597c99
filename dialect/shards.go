package dialect

import (
	"context"

	"github.com/idemgo/idem/driver"
)

// ShardTargeter is an optional interface of a Dialect whose Capabilities
// say ShardedByKey: it addresses a session to one shard, so that a purge,
// whose batch reads and locks expired records wherever they are, runs on
// each shard in turn, each batch a transaction that stays on its shard. A
// Store's Purge then pins one connection of the driver's pool
// (driver.Pinner), lists the shards on it, targets it at each shard with
// TargetShard and runs the dialect's PurgeSelect and PurgeDelete there
// as on any other database, and closes the connection at the end rather
// than hand a targeted session back to the pool.
type ShardTargeter interface {
	// Shards lists the shards of the keyspace that q's session uses, the
	// one that holds the table, each as TargetShard takes it. q is the
	// pinned connection, outside any transaction.
	Shards(ctx context.Context, q driver.Tx) ([]string, error)

	// TargetShard returns the statement that sends the session's later
	// statements to shard alone, bypassing the routing by key.
	TargetShard(shard string) string
}
