package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/internal/codec"
)

// The plain paths are the design's own limit, with no library: the fewest
// statements that claim a key in the transaction of the work and store its
// response, on the Store's own table, binding the values the hand path binds
// (the header encoded and the checksum computed as idem does), so that the
// row stored is the same.
//
//	plain:        BEGIN, INSERT ... ON CONFLICT (key) DO NOTHING RETURNING key
//	              (INSERT IGNORE on MariaDB and MySQL), the effect, UPDATE the
//	              response, COMMIT
//	plain replay: BEGIN, the same INSERT, which inserts nothing, SELECT the
//	              record, ROLLBACK

// plainSQL holds the plain paths' statements on one idem table.
type plainSQL struct {
	mysql bool
	// claim's parameters: key, request_hash, created_at, expires_at, token;
	// complete's: status, header, body, checksum, key; read's: key.
	claim, complete, read string
}

func newPlainSQL(k *kind, table string) plainSQL {
	t, key := k.quote(table), "key"
	q := plainSQL{mysql: k.mysql}
	if k.mysql {
		key = k.quote("key")
		q.claim = fmt.Sprintf("INSERT IGNORE INTO %s (%s, request_hash, created_at, expires_at, token) VALUES (%s)", t, key, k.phs(5))
	} else {
		q.claim = fmt.Sprintf("INSERT INTO %s (key, request_hash, created_at, expires_at, token) VALUES (%s) ON CONFLICT (key) DO NOTHING RETURNING key", t, k.phs(5))
	}
	q.complete = fmt.Sprintf("UPDATE %s SET status = %s, header = %s, body = %s, checksum = %s WHERE %s = %s",
		t, k.ph(1), k.ph(2), k.ph(3), k.ph(4), key, k.ph(5))
	q.read = fmt.Sprintf("SELECT request_hash, status, header, body, checksum FROM %s WHERE %s = %s", t, key, k.ph(1))
	return q
}

// plainClaimArgs are the claim's arguments for key k.
func plainClaimArgs(k []byte, now, token int64) []any {
	return []any{k, reqHash[:], now, now + (24 * time.Hour).Microseconds(), token}
}

// plainCompleteArgs are the completion's arguments for key k: the response
// with its header encoded and its checksum, as idem stores them.
func plainCompleteArgs(k []byte) []any {
	header := codec.EncodeHeader(response.Header)
	sum := codec.Checksum(k, reqHash[:], int64(response.Status), header, response.Body)
	return []any{int64(response.Status), header, response.Body, sum[:], k}
}

// plainFinished checks that the record a plain replay read is the finished
// request's.
func plainFinished(hash []byte, status sql.NullInt64) error {
	if !bytes.Equal(hash, reqHash[:]) || !status.Valid {
		return fmt.Errorf("read: hash %x, status %v: not the finished request", hash, status)
	}
	return nil
}

// plainClaim inserts the record of key in tx, and reports whether it did:
// false when the key has one.
func (b *bench) plainClaim(ctx context.Context, tx *sql.Tx, k []byte, now, token int64) (bool, error) {
	args := plainClaimArgs(k, now, token)
	if b.plain.mysql {
		r, err := tx.ExecContext(ctx, b.plain.claim, args...)
		if err != nil {
			return false, err
		}
		n, err := r.RowsAffected()
		return n == 1, err
	}
	var got []byte
	err := tx.QueryRowContext(ctx, b.plain.claim, args...).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// plainNew handles a new key: BEGIN, the INSERT, the effect of n INSERTs,
// the UPDATE, COMMIT.
func (b *bench) plainNew(ctx context.Context, key string, n int, token int64) error {
	k := []byte(key)
	now := time.Now().UnixMicro()
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	won, err := b.plainClaim(ctx, tx, k, now, token)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if !won {
		return errors.New("claim: the new key has a record")
	}
	if err := b.effect(ctx, tx, k, n); err != nil {
		return err
	}
	r, err := tx.ExecContext(ctx, b.plain.complete, plainCompleteArgs(k)...)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v", n, err)
	}
	return tx.Commit()
}

// plainReplay handles the retry of a finished key: BEGIN, the INSERT that
// inserts nothing, the SELECT of the record, ROLLBACK.
func (b *bench) plainReplay(ctx context.Context, key string) error {
	k := []byte(key)
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	won, err := b.plainClaim(ctx, tx, k, time.Now().UnixMicro(), 0)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if won {
		return errors.New("claim: the finished key had no record")
	}
	var (
		hash, header, body, sum []byte
		status                  sql.NullInt64
	)
	if err := tx.QueryRowContext(ctx, b.plain.read, k).Scan(&hash, &status, &header, &body, &sum); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := plainFinished(hash, status); err != nil {
		return err
	}
	return tx.Rollback()
}
