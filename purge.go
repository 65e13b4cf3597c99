package idem

import (
	"context"
	"database/sql"
	"fmt"
)

// Purge deletes expired records, batch at a time, each batch a statement of
// its own outside any transaction, so that it never holds many locks for
// long. It returns how many records it deleted, also when it stops early on
// an error or a cancelled context. Run it from time to time; records that
// expired but are not yet purged no longer count, and a new claim of their
// key replaces them.
//
// On SQLite each batch holds the database's one write lock, and every
// request waits for it: there, purge a few hundred records at a time while
// requests are being served. docs/operations.md suggests a schedule.
func (s *Store) Purge(ctx context.Context, db *sql.DB, batch int) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if db == nil {
		return 0, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	if batch <= 0 {
		return 0, fmt.Errorf("%w: purge batch must be positive, got %d", ErrInvalidArgument, batch)
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		v := &values{now: s.clock().UnixMicro(), limit: int64(batch)}
		r, err := db.ExecContext(ctx, s.purge.query, s.purge.args(v)...)
		if err != nil {
			return total, fmt.Errorf("idem: purge: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("idem: purge: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}
