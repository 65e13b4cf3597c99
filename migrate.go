package idem

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
)

// Schema returns the statements that create the table and its index, for
// migration tools. Migrate runs the same statements.
func (s *Store) Schema() []string {
	if s.check() != nil {
		return nil
	}
	return append([]string(nil), s.schema...)
}

// Migrate creates the table and its index if they are missing, and brings a
// table made by an earlier version of this package up to date by adding the
// columns that older tables lack (the dialect's Upgrades): on PostgreSQL and
// SQLite the token column that guards Complete and Abandon (see
// dialect.Statements), and on every built-in dialect the phase, lease_until
// and resume_backoff columns of multi-step requests and the incarnation of
// each record. Records already in the table keep working, with incarnation
// 0. Running it again does nothing. On MySQL it creates the claim's
// procedures too, the current one and those of earlier versions, which
// their binaries call during a rolling upgrade (docs/operations.md,
// "Upgrading the table").
//
// Several services may run it at the same moment, as a deploy that starts
// them together does: a caller that finds the table, index or column made
// under it by another takes that as done, and fails only on any other error
// (TestMigrateConcurrent, TestMigrateOtherErrorsFail).
//
// Adding a column takes a lock on the whole table for a moment (on
// PostgreSQL it waits for the transactions that use the table to end, and
// holds back the ones that come after); run it at deploy time. Migration
// tools get the same change from the files in the module's migrations
// directory.
func (s *Store) Migrate(ctx context.Context, db *sql.DB) error {
	return migrate(ctx, s, sqlOn(db, nil))
}

// migrate is Migrate on any driver's database, which runs the statements
// and the checks of the upgrades, which return one number.
//
// Several services that start at once run Migrate at once, and none of the
// servers makes its steps atomic: two CREATE TABLE IF NOT EXISTS may both
// find no table and collide in PostgreSQL's catalog, and two callers may
// both find a column missing and both add it. Only the first of each wins;
// the others get an error saying that the object is there (classified
// dialect.ErrorExists), and then look again: a statement of the schema, run again, finds what
// the other caller made, and an upgrade's check counts its column. Migrate
// takes no lock of its own: the MySQL family ends a transaction at every
// ALTER TABLE, so only a session's lock would span the steps, and a session
// lock outlives the use of a pooled connection when a caller's context ends
// before the lock is released. Any other error fails Migrate.
func migrate(ctx context.Context, s *Store, db driver.Tx) error {
	if err := s.on(db, "database"); err != nil {
		return err
	}
	exec := func(ctx context.Context, q string) error {
		_, err := db.Exec(ctx, q)
		return err
	}
	count := func(ctx context.Context, q string) (n int, err error) {
		err = db.QueryRow(ctx, q, nil, &n)
		return n, err
	}
	existed := func(err error) bool { return s.d.Classify(err) == dialect.ErrorExists }
	for _, q := range s.schema {
		err := exec(ctx, q)
		if err != nil && existed(err) {
			err = exec(ctx, q)
		}
		if err != nil {
			return s.wrap("migrate "+s.table, err)
		}
	}
	for _, c := range s.d.Upgrades(s.table) {
		n, err := count(ctx, c.Check)
		if err != nil {
			return s.wrap("migrate "+s.table, err)
		}
		if n > 0 {
			continue
		}
		err = exec(ctx, c.Apply)
		if err != nil && existed(err) {
			if again, cerr := count(ctx, c.Check); cerr == nil && again > 0 {
				err = nil
			}
		}
		if err != nil {
			return s.wrap("migrate "+s.table, err)
		}
	}
	return s.checkShardColumn(ctx, db)
}

// checkShardColumn makes sure that a Store with a shard column has a table
// with it, of the type that holds the kind of its values exactly: a table
// that was there before Migrate ran may have been made without it, or with
// a type that cuts, rounds or folds the values (docs/operations.md,
// "Moving a table to a shard column").
func (s *Store) checkShardColumn(ctx context.Context, db driver.Tx) error {
	sc, ok := s.d.(dialect.ShardColumn)
	if !s.sharded() || !ok {
		return nil
	}
	q, typ := sc.ShardColumnCheck(s.table, s.shardKind)
	var columns, fitting int
	if err := db.QueryRow(ctx, q, nil, &columns, &fitting); err != nil {
		return s.wrap("migrate "+s.table+": check shard_key", err)
	}
	switch {
	case columns == 0:
		return fmt.Errorf("%w: migrate %s: the table has no shard_key column, which idem.WithShardColumn(%v) needs; it was made without one, and Migrate does not convert a table: see docs/operations.md, \"Moving a table to a shard column\"",
			ErrInvalidArgument, s.table, s.shardKind)
	case fitting == 0:
		return fmt.Errorf("%w: migrate %s: the table's shard_key is not of type %s, which holds the values of idem.WithShardColumn(%v) exactly: see docs/operations.md, \"Moving a table to a shard column\"",
			ErrInvalidArgument, s.table, typ, s.shardKind)
	}
	return nil
}
