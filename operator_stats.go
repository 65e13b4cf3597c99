package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/driver"
)

// Stats is the state of a Store's table at one moment, as Store.Stats counts
// it, by the Store's clock.
type Stats struct {
	// Live counts the records that still count: a retry with their key
	// replays the stored response, or finds the request in flight.
	Live int64

	// InFlight counts the live records without a stored response: the
	// multi-step requests under way (Store.Run), and the keys whose
	// request will never finish, which an operator settles or releases
	// (Store.Unfinished lists the first, ErrTxEnded says how the others
	// come about). It counts committed records, as the database shows
	// them to a read outside any transaction: a claim whose transaction
	// has not committed is not among them.
	InFlight int64

	// Expired counts the records whose retention window has passed: they
	// no longer count, and Purge deletes them.
	Expired int64

	// Oldest is when the oldest record in the table, live or expired, was
	// claimed; zero when the table is empty. Much older than the retention
	// window (WithRetention), it says that Purge does not run.
	Oldest time.Time
}

// Stats counts the records in the Store's table: live, in flight and
// expired, and when the oldest was claimed, for an operator's dashboard or
// the idem command's stats. It is one statement of the dialect's
// (dialect.Statements.Stats), outside any transaction and without locks,
// which reads every row, as COUNT(*) does: on a table of many millions of
// records it takes a while, and a replica answers it as well as the
// primary, a little behind. On a table with a shard column it counts the
// records of every shard value. It returns an error that matches
// errors.ErrUnsupported, without sending anything, for a dialect without
// that statement.
func (s *Store) Stats(ctx context.Context, db *sql.DB) (Stats, error) {
	return stats(ctx, s, sqlOn(db, nil))
}

// CountExpired counts the expired records, those that Purge has yet to
// delete, through the index on expires_at: it reads those records' part of
// the index alone, where Stats reads every row, so it can be asked while a
// purge runs, to follow it. It is one statement of the dialect's
// (dialect.Statements.CountExpired), outside any transaction and without
// locks. It returns an error that matches errors.ErrUnsupported, without
// sending anything, for a dialect without that statement.
func (s *Store) CountExpired(ctx context.Context, db *sql.DB) (int64, error) {
	return countExpired(ctx, s, sqlOn(db, nil))
}

// stats is Stats on any driver's database.
func stats(ctx context.Context, s *Store, db driver.Tx) (Stats, error) {
	if err := s.on(db, "database"); err != nil {
		return Stats{}, err
	}
	if s.stats.query == "" {
		return Stats{}, fmt.Errorf("idem: stats: the %s dialect has no Stats statement: %w", s.d.Name(), errors.ErrUnsupported)
	}
	var (
		st     Stats
		oldest sql.NullInt64
	)
	v := &values{now: s.clock().UnixMicro()}
	if err := db.QueryRow(ctx, s.stats.query, s.stats.args(v), &st.Live, &st.InFlight, &st.Expired, &oldest); err != nil {
		return Stats{}, s.wrap("stats", err)
	}
	if oldest.Valid {
		st.Oldest = time.UnixMicro(oldest.Int64)
	}
	return st, nil
}

// countExpired is CountExpired on any driver's database.
func countExpired(ctx context.Context, s *Store, db driver.Tx) (int64, error) {
	if err := s.on(db, "database"); err != nil {
		return 0, err
	}
	if s.countExpired.query == "" {
		return 0, fmt.Errorf("idem: count expired: the %s dialect has no CountExpired statement: %w", s.d.Name(), errors.ErrUnsupported)
	}
	var n int64
	v := &values{now: s.clock().UnixMicro()}
	if err := db.QueryRow(ctx, s.countExpired.query, s.countExpired.args(v), &n); err != nil {
		return 0, s.wrap("count expired", err)
	}
	return n, nil
}
