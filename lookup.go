package idem

import (
	"context"
	"database/sql"
	"fmt"
)

// Querier is what Lookup reads through: a *sql.DB, *sql.Tx or *sql.Conn.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Lookup returns the live record of key, as a Result: Replay with the stored
// response when the request finished, InFlight when its record was committed
// unfinished. It returns ErrNotFound when the key has no live record, which
// includes a key that another transaction holds uncommitted. Read through
// the primary database: a replica may not have the record yet.
func (s *Store) Lookup(ctx context.Context, q Querier, key string) (Result, error) {
	if err := s.check(); err != nil {
		return Result{}, err
	}
	if q == nil {
		return Result{}, fmt.Errorf("%w: nil Querier", ErrInvalidArgument)
	}
	if err := validateKey(key); err != nil {
		return Result{}, err
	}
	k := []byte(key)
	rec, err := s.find(ctx, q, k)
	if err != nil {
		return Result{}, fmt.Errorf("idem: lookup: %w", err)
	}
	if rec == nil || !rec.live(s.clock().UnixMicro()) {
		return Result{}, ErrNotFound
	}
	return s.decide(k, nil, rec)
}
