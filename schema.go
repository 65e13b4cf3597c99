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

// Migrate creates the table and its index if they are missing. Running it
// again does nothing.
func (s *Store) Migrate(ctx context.Context, db *sql.DB) error {
	if err := s.check(); err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("%w: nil database", ErrInvalidArgument)
	}
	for _, q := range s.schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("idem: migrate %s: %w", s.table, err)
		}
	}
	return nil
}
