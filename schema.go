package idem

import (
	"context"
	"database/sql"
	"fmt"
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
// columns that older tables lack: on PostgreSQL and SQLite the token column
// that guards Complete and Abandon (see Statements), and on every built-in
// dialect the phase and lease_until columns of multi-step requests. Records
// already in the table keep working. Running it again does nothing.
//
// Adding a column takes a lock on the whole table for a moment (on
// PostgreSQL it waits for the transactions that use the table to end, and
// holds back the ones that come after); run it at deploy time. Migration
// tools get the same change from the files in the module's migrations
// directory.
func (s *Store) Migrate(ctx context.Context, db *sql.DB) error {
	if err := s.check(); err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	return s.migrate(ctx, func(ctx context.Context, q string) error {
		_, err := db.ExecContext(ctx, q)
		return err
	}, func(ctx context.Context, q string) (n int, err error) {
		err = db.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	})
}

// migrate is Migrate, running statements with exec and the checks of the
// upgrades, which return one number, with count.
func (s *Store) migrate(ctx context.Context, exec func(context.Context, string) error, count func(context.Context, string) (int, error)) error {
	for _, q := range s.schema {
		if err := exec(ctx, q); err != nil {
			return fmt.Errorf("idem: migrate %s: %w", s.table, err)
		}
	}
	u, ok := s.d.(upgrader)
	if !ok {
		return nil
	}
	for _, c := range u.upgrades(s.table) {
		n, err := count(ctx, c.check)
		if err != nil {
			return fmt.Errorf("idem: migrate %s: %w", s.table, err)
		}
		if n > 0 {
			continue
		}
		if err := exec(ctx, c.apply); err != nil {
			return fmt.Errorf("idem: migrate %s: %w", s.table, err)
		}
	}
	return nil
}

// upgrader is implemented by the built-in dialects whose tables, as earlier
// versions made them, lack something that the Store needs now.
type upgrader interface {
	upgrades(table string) []upgrade
}

// upgrade is one change to a table made by an earlier version: check counts
// what the change adds (0 when it is missing), and apply makes it. Looking
// first keeps Migrate from taking the table's lock for nothing.
type upgrade struct{ check, apply string }
