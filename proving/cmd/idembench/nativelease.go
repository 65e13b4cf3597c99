package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemgo/idem/idempgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgxLeases are the lease statements (lease.go) on a pgx pool, for the
// lease path of the pgx-native setting: the reserving upsert and the lookup
// in autocommit, then the handler's transaction on the pool, which finds it
// with idempgx.Tx, with the completion inside it. They are PostgreSQL's
// statements only, as the pool is.
type pgxLeases struct {
	pool *pgxpool.Pool
	q    leaseSQL
}

func (l pgxLeases) reserve(ctx context.Context, key, hash []byte, token, now int64) (bool, error) {
	var got int64
	err := l.pool.QueryRow(ctx, l.q.reserve, leaseReserveArgs(key, hash, token, now)...).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return reserved(got, token, err)
}

func (l pgxLeases) lookup(ctx context.Context, key []byte) (leaseRecord, error) {
	var rec leaseRecord
	err := l.pool.QueryRow(ctx, l.q.lookup, key).Scan(&rec.hash, &rec.status, &rec.header, &rec.body)
	if errors.Is(err, pgx.ErrNoRows) {
		err = errNoLease
	}
	return rec, err
}

func (l pgxLeases) inTx(ctx context.Context, serve func(ctx context.Context) []any) error {
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	args := serve(idempgx.WithTx(ctx, tx))
	if args == nil {
		return nil
	}
	tag, err := tx.Exec(ctx, l.q.complete, args...)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if err := completed(tag.RowsAffected(), nil); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (l pgxLeases) release(ctx context.Context, key []byte, token int64) error {
	_, err := l.pool.Exec(ctx, l.q.release, key, token)
	return err
}
