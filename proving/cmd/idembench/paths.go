package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
)

// The paths through idem, and the same statements by hand.

// claimed runs one request through idem: BEGIN, Do (claim, the effect,
// completion), COMMIT. claimLat, when set, gets the time the claim took.
func (b *bench) claimed(ctx context.Context, key string, n int, claimLat *time.Duration) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	start := time.Now()
	res, err := b.store.Do(ctx, tx, key, reqHash[:], func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if claimLat != nil {
			*claimLat = time.Since(start)
		}
		return response, b.effect(ctx, tx, []byte(key), n)
	})
	if err != nil {
		return err
	}
	if res.Outcome != idem.Claimed {
		return fmt.Errorf("outcome %v, want claimed", res.Outcome)
	}
	return tx.Commit()
}

// replay asks again for a key that finished: BEGIN, Do, ROLLBACK.
func (b *bench) replay(ctx context.Context, key string) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := b.store.Do(ctx, tx, key, reqHash[:], func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{}, errors.New("the work ran on a replay")
	})
	if err != nil {
		return err
	}
	if res.Outcome != idem.Replay {
		return fmt.Errorf("outcome %v, want replay", res.Outcome)
	}
	return nil
}

// lookupFirstDoTx runs one request through DoTx on the store of
// LookupAlways and expects want: for Claimed, the lookup, then BEGIN,
// claim, the effect, completion, COMMIT; for Replay, the lookup alone.
func (b *bench) lookupFirstDoTx(ctx context.Context, key string, want idem.Outcome) error {
	return b.doTx(ctx, b.lookupFirst, key, 1, want)
}

// doTx runs one request through s.DoTx, with an effect of n INSERTs, and
// expects want.
func (b *bench) doTx(ctx context.Context, s *idem.Store, key string, n int, want idem.Outcome) error {
	res, err := s.DoTx(ctx, b.db, nil, key, reqHash[:], func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if want != idem.Claimed {
			return idem.Response{}, errors.New("the work ran on a replay")
		}
		return response, b.effect(ctx, tx, []byte(key), n)
	})
	if err == nil && res.Outcome != want {
		err = fmt.Errorf("outcome %v, want %v", res.Outcome, want)
	}
	return err
}

// bare is the effect without idem: BEGIN, the effect, COMMIT.
func (b *bench) bare(ctx context.Context, key string, n int) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := b.effect(ctx, tx, []byte(key), n); err != nil {
		return err
	}
	return tx.Commit()
}

// hand sends idem's claim and completion statements, copied from
// Store.Queries, by hand: BEGIN, claim, the effect, completion, COMMIT. It
// binds the arguments directly and stores the same record, so that the
// difference to claimed is what Do itself costs. Where the dialect claims in
// two statements (ClaimWrite, Claim), it sends both, in the Store's order.
//
// With lookupFirst it reads the key first, as a store of LookupAlways
// does, and expects no record.
func (b *bench) hand(ctx context.Context, key string, n int, token int64, lookupFirst bool) error {
	k := []byte(key)
	if lookupFirst {
		var hash []byte
		err := b.db.QueryRowContext(ctx, b.queries["Lookup"].SQL, k).Scan(&hash)
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("lookup: %v, want no row", err)
		}
	}
	now := time.Now().UnixMicro()
	arg := func(name string) any {
		switch name {
		case "key":
			return k
		case "request_hash":
			return reqHash[:]
		case "created_at":
			return now
		case "expires_at":
			return now + (24 * time.Hour).Microseconds()
		case "token":
			return token
		case "incarnation":
			return token // any nonzero number; the path never reads it
		case "lock_id":
			sum := sha256.Sum256(k)
			return int64(binary.BigEndian.Uint64(sum[:8]))
		}
		return nil
	}
	bind := func(q idem.StatementText) []any {
		args := make([]any, len(q.Params))
		for i, p := range q.Params {
			args[i] = arg(p)
		}
		return args
	}
	exec := func(tx *sql.Tx, name string) error {
		q, ok := b.queries[name]
		if !ok {
			return nil
		}
		if _, err := tx.ExecContext(ctx, q.SQL, bind(q)...); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	claim, complete := b.queries["Claim"], b.queries["Complete"]
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var (
		won, busy                    bool
		hash, header, body, sum      []byte
		status, createdAt, expiresAt sql.NullInt64
		owner, incarnation           sql.NullInt64
	)
	if err := exec(tx, "ClaimWrite"); err != nil {
		return err
	}
	err = tx.QueryRowContext(ctx, claim.SQL, bind(claim)...).Scan(&won, &busy, &hash, &status, &header, &body, &sum, &createdAt, &expiresAt, &owner, &incarnation)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		won = true // MySQL's claim procedure sends a row only when it lost
	case err != nil:
		return fmt.Errorf("claim: %w", err)
	}
	if !won {
		return errors.New("claim lost")
	}
	if err := b.effect(ctx, tx, k, n); err != nil {
		return err
	}
	header = codec.EncodeHeader(response.Header)
	cs := codec.Checksum(k, reqHash[:], int64(response.Status), header, response.Body)
	var args []any
	for _, p := range complete.Params {
		switch p {
		case "status":
			args = append(args, int64(response.Status))
		case "header":
			args = append(args, header)
		case "body":
			args = append(args, response.Body)
		case "checksum":
			args = append(args, cs[:])
		default:
			args = append(args, arg(p))
		}
	}
	r, err := tx.ExecContext(ctx, complete.SQL, args...)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v", n, err)
	}
	return tx.Commit()
}
