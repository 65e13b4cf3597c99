package idem

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
)

// Purge deletes expired records, batch at a time, so that it never holds
// many locks for long. It returns how many records it deleted, also when it
// stops early on an error or a cancelled context. Run it from time to time;
// records that expired but are not yet purged no longer count, and a new
// claim of their key replaces them.
//
// Where writers run concurrently, each batch is a short transaction of its
// own: it locks up to batch expired records (fewer where the dialect
// bounds a batch, 1,000 on PostgreSQL; see Capabilities.MaxPurgeBatch),
// skipping those that a claim is
// taking over, and deletes those that are still expired. It never waits for
// a claim while it holds the records it has deleted, which new requests
// with those keys would wait for in turn. Where the database cannot skip a
// locked record (see Statements.PurgeSelect), a batch waits no longer than
// the lock timeout and is then given up: Purge returns an error that
// matches ErrRetry, and a later run carries on.
//
// On a table sharded by key behind a router that refuses a transaction on
// two shards, as Vitess's vtgate does with transaction_mode SINGLE, a
// batch sent through the routing would read every shard. There (a dialect
// that is a dialect.ShardTargeter, such as Vitess) Purge takes one
// connection out of db's pool, targets it at each shard in turn and runs
// the batches there, each a transaction on that shard; it closes that
// connection at the end, whatever happened, rather than hand a targeted
// session back to the pool. docs/scaling.md says what vtgate takes.
//
// On SQLite each batch is one statement that holds the database's one write
// lock, and every request waits for it: there, purge a few hundred records
// at a time while requests are being served. docs/operations.md suggests a
// schedule.
func (s *Store) Purge(ctx context.Context, db *sql.DB, batch int) (int64, error) {
	return purge(ctx, s, sqlOn(db, nil), batch)
}

// purge is Purge on any driver's database.
func purge[TX any](ctx context.Context, s *Store, db driver.DB[TX], batch int) (int64, error) {
	if err := s.on(db, "database"); err != nil {
		return 0, err
	}
	if batch <= 0 {
		return 0, fmt.Errorf("%w: purge batch must be positive, got %d", ErrInvalidArgument, batch)
	}
	if m := dialect.CapabilitiesOf(s.d).MaxPurgeBatch; m > 0 {
		batch = min(batch, m)
	}
	var full statement // PurgeDelete bound for a whole chunk of keys
	if s.purgeDelete != "" {
		var err error
		if full, err = s.purgeDeleteFor(min(batch, purgeChunk)); err != nil {
			return 0, err
		}
	}
	if t, ok := s.d.(dialect.ShardTargeter); ok && s.purgeSelect.query != "" {
		return purgeShards(ctx, s, db, t, batch, full)
	}
	return purgeBatches(ctx, s, db, batch, s.purgeSelect, full)
}

// purgeBatches runs batches on db, each with sel as its PurgeSelect, until
// one finds fewer than batch expired records, and returns how many records
// they deleted.
func purgeBatches[TX any](ctx context.Context, s *Store, db driver.DB[TX], batch int, sel, full statement) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		v := &values{now: s.clock().UnixMicro(), limit: int64(batch)}
		var (
			n, found int64
			err      error
		)
		if s.purgeSelect.query == "" {
			n, err = s.purgeStatement(ctx, db, v)
			found = n
		} else {
			n, found, err = purgeBatch(ctx, s, db, v, sel, full)
		}
		total += n
		if err != nil {
			return total, err
		}
		if found < int64(batch) {
			return total, nil
		}
	}
}

// purgeStatement runs a dialect's one-statement Purge.
func (s *Store) purgeStatement(ctx context.Context, db driver.Tx, v *values) (int64, error) {
	n, err := s.exec(ctx, db, s.purge, v)
	if err != nil {
		return 0, fmt.Errorf("idem: purge: %w", err)
	}
	return n, nil
}

// purgeBatch runs one batch of PurgeSelect and PurgeDelete in a transaction,
// and returns how many records it deleted and how many PurgeSelect found. full
// is PurgeDelete bound for a whole batch, the common case.
func purgeBatch[TX any](ctx context.Context, s *Store, db driver.DB[TX], v *values, sel, full statement) (deleted, found int64, err error) {
	tx, _, err := db.Begin(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("idem: purge: %w", err)
	}
	deleted, found, err = s.purgeKeys(ctx, tx, v, sel, full)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx)) // the batch's error is the one to report
		return 0, found, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, found, s.purgeError(err)
	}
	return deleted, found, nil
}

// purgeKeys reads the keys of one batch with sel, the PurgeSelect, and
// deletes them with PurgeDelete, in tx.
func (s *Store) purgeKeys(ctx context.Context, tx driver.Tx, v *values, sel, full statement) (deleted, found int64, err error) {
	err = tx.Query(ctx, sel.query, sel.args(v), func(scan func(dest ...any) error) error {
		var (
			k     []byte
			shard any
		)
		dest := []any{&k}
		if s.sharded() {
			dest = []any{&shard, &k}
		}
		if err := scan(dest...); err != nil {
			return err
		}
		v.keys = append(v.keys, k)
		if s.sharded() {
			shard, err := s.scannedShard(shard)
			if err != nil {
				return err
			}
			v.shards = append(v.shards, shard)
		}
		return nil
	})
	if err != nil {
		return 0, 0, s.purgeError(err)
	}
	found = int64(len(v.keys))
	if s.purgeHeld != nil {
		s.purgeHeld(v.keys)
	}
	keys, shards := v.keys, v.shards
	for len(keys) > 0 {
		v.keys = keys[:min(len(keys), purgeChunk)]
		keys = keys[len(v.keys):]
		if shards != nil {
			v.shards, shards = shards[:len(v.keys)], shards[len(v.keys):]
		}
		del := full
		if len(del.params) != len(v.keys)+len(v.shards)+1 {
			if del, err = s.purgeDeleteFor(len(v.keys)); err != nil {
				return deleted, found, err
			}
		}
		n, err := s.exec(ctx, tx, del, v)
		if err != nil {
			return deleted, found, s.purgeError(err)
		}
		deleted += n
	}
	return deleted, found, nil
}

// purgeChunk is the most keys one PurgeDelete binds: PostgreSQL and MySQL
// take at most 65,535 parameters in a statement, so a larger batch deletes
// its keys in several statements of the same transaction.
const purgeChunk = 10000

// purgeDeleteFor binds PurgeDelete for a batch of n keys.
func (s *Store) purgeDeleteFor(n int) (statement, error) {
	return s.binder().bindList("purge delete", s.purgeDelete, n, paramKeys, paramNow)
}

// purgeError wraps an error of a purge's batch, with ErrRetry when the batch
// was given up for a lock it would not wait for longer, or lost to a
// conflict: nothing of it was deleted, and a later run can delete it.
func (s *Store) purgeError(err error) error {
	switch s.d.Classify(err) {
	case dialect.ErrorLockTimeout, dialect.ErrorRetry:
		return fmt.Errorf("idem: purge: batch given up: %w: %w", ErrRetry, err)
	}
	return fmt.Errorf("idem: purge: %w", err)
}
