package idem

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"

	"github.com/idemgo/idem/driver"
)

// Querier is what Lookup reads through: a *sql.DB, *sql.Tx or *sql.Conn, or
// a value of the caller's with their QueryRowContext. Lookup sends one
// statement, which returns at most one row, so a Querier needs nothing
// more; the Store reads the record through it as it reads one in its own
// transactions.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Lookup returns the live record of key, as a Result: Replay with the stored
// response when the request finished, InFlight when its record was committed
// unfinished. It returns ErrNotFound when the key has no live record, which
// includes a key that another transaction holds uncommitted: through a
// *sql.DB on MySQL or MariaDB, whose sessions may read uncommitted rows,
// the read runs in a read-only transaction at READ COMMITTED; a *sql.Tx or
// *sql.Conn reads as its session does. Read through the primary database:
// a replica may not have the record yet.
func (s *Store) Lookup(ctx context.Context, q Querier, key string) (Result, error) {
	if db, ok := q.(*sql.DB); ok {
		return lookup(ctx, s, sqlOn(db, nil), key)
	}
	if err := s.check(); err != nil {
		return Result{}, err
	}
	if isNilQuerier(q) {
		return Result{}, fmt.Errorf("%w: nil Querier", ErrInvalidArgument)
	}
	return s.lookupWith(ctx, s.findThrough(querierRow{q}), key)
}

// querierRow is a Querier as the Store reads a row through it, as through
// a driver.Tx.
type querierRow struct{ q Querier }

func (r querierRow) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return r.q.QueryRowContext(ctx, query, args...).Scan(dest...)
}

// lookup is Lookup on any driver's database, which it reads outside any
// transaction.
func lookup(ctx context.Context, s *Store, db driver.Tx, key string) (Result, error) {
	if err := s.on(db, "database"); err != nil {
		return Result{}, err
	}
	return s.lookupWith(ctx, s.findOutside(db), key)
}

// lookupWith is Lookup, reading the record with find.
func (s *Store) lookupWith(ctx context.Context, find findFunc, key string) (Result, error) {
	if err := validateKey(key); err != nil {
		return Result{}, err
	}
	shard, err := s.shardOf(ctx)
	if err != nil {
		return Result{}, err
	}
	k := []byte(key)
	rec, err := find(ctx, k, shard)
	if err != nil {
		return Result{}, s.wrap("lookup", err)
	}
	if rec == nil || !rec.live(s.clock().UnixMicro()) {
		return Result{}, ErrNotFound
	}
	return s.decide(k, nil, rec)
}

// isNilQuerier reports whether q is nil, or a nil *sql.DB, *sql.Tx or
// *sql.Conn, whose methods would panic.
func isNilQuerier(q Querier) bool {
	switch q := q.(type) {
	case nil:
		return true
	case *sql.DB:
		return q == nil
	case *sql.Tx:
		return q == nil
	case *sql.Conn:
		return q == nil
	}
	v := reflect.ValueOf(q)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
