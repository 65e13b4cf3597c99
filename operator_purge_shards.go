package idem

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
)

// purgeShards is Purge on a table sharded by key behind a router that
// refuses a transaction on two shards (dialect.ShardTargeter): a batch's
// PurgeSelect, sent through the router, would read every shard. So the
// purge pins one connection, addresses it to each shard in turn and runs
// the batches there, each a transaction on that shard alone, with the
// dialect's own statements. The targeted session never serves anyone
// else: the connection is closed at the end, whatever happened, and the
// pool opens a new one when it needs it.
func purgeShards[TX any](ctx context.Context, s *Store, db driver.DB[TX], t dialect.ShardTargeter, batch int, full statement) (total int64, err error) {
	p, ok := db.(driver.Pinner[TX])
	if !ok {
		return 0, fmt.Errorf("%w: the %s dialect purges shard by shard on one connection, which this driver cannot lend (driver.Pinner)", ErrInvalidArgument, s.d.Name())
	}
	conn, closeConn, err := p.Pin(ctx)
	if err != nil {
		return 0, fmt.Errorf("idem: purge: %w", err)
	}
	defer func() {
		if cerr := closeConn(); cerr != nil && err == nil {
			err = fmt.Errorf("idem: purge: closing the connection it targeted: %w", cerr)
		}
	}()
	// vtgate loses the value of a LIMIT placeholder in a statement
	// prepared on a session targeted at a shard, and the shard then sees
	// LIMIT NULL: the batch's size goes into the statement as a number.
	sel, err := s.binder().bind("purge select", strings.ReplaceAll(s.purgeSelectSQL, "{limit}", strconv.Itoa(batch)), paramNow)
	if err != nil {
		return 0, err
	}
	shards, err := t.Shards(ctx, conn)
	if err != nil {
		return 0, fmt.Errorf("idem: purge: listing the shards: %w", err)
	}
	for _, shard := range shards {
		if _, err := conn.Exec(ctx, t.TargetShard(shard)); err != nil {
			return total, fmt.Errorf("idem: purge: targeting shard %s: %w", shard, err)
		}
		n, err := purgeBatches(ctx, s, conn, batch, sel, full)
		total += n
		if err != nil {
			return total, fmt.Errorf("%w, on shard %s", err, shard)
		}
	}
	return total, nil
}
