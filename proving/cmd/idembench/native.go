package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The native paths measure idempgx, idem on pgx's own interface, where a
// service holds a pgxpool.Pool and never opens a *sql.DB. idempgx's DoTx
// sends the claim with BEGIN and the completion with COMMIT, which
// database/sql cannot express; the question is what that saves, against the
// design's plain statements on the same pool and against idem through
// database/sql on the same driver. So the pgx-native setting measures, in
// the same rounds:
//
//   - claimed: idempgx.DoTx with the same effect as the other settings,
//     through pgx.Tx; "claimed sql", idem's DoTx through database/sql on
//     the pgx driver (the stdlib package).
//   - plain: the plain path's statements (plain.go) on the pool, each
//     awaited before the next: BEGIN, the INSERT ... ON CONFLICT DO NOTHING
//     RETURNING key, the effect, the UPDATE, COMMIT.
//   - bare: BEGIN, the effect, COMMIT on the pool.
//   - replay and "replay sql": the retry of a finished key through DoTx,
//     natively and on database/sql, on a store of LookupNever, so
//     that the claim answers it in its transaction as on the other settings'
//     replay path, rather than a read before it (the lookupfirst scenario
//     measures that); "plain replay", the plain retry on the pool.
//   - http: the order handler behind idempgx.NewMiddleware in its default
//     configuration; "http sql", behind idemhttp.New on database/sql, as
//     the other settings' http path; lease, behind the lease middleware on
//     pgx (nativelease.go). Each with its replay.
//
// The pool has as many connections as the *sql.DB of the other paths, and
// pgxpool's defaults otherwise: its check of a connection idle for more than
// a second costs a round trip, which clients kept busy do not meet.

// nativePaths returns the paths of the pgx-native setting that the
// scenarios select. hand and lookupfirst have none: they measure idem's
// statements and a Store option, which the driver does not change.
func nativePaths(c config) []path {
	var ps []path
	native := openOpts{pgx: true}
	for _, n := range []int{1, 5} {
		if n == 5 && !c.scenarios["effect5"] {
			continue
		}
		suffix := ""
		if n == 5 {
			suffix = " x5"
		}
		if c.scenarios["bare"] {
			ps = append(ps, keyed("bare"+suffix, native, func(b *bench, ctx context.Context, key string, _ int64) error {
				return b.pgxBare(ctx, key, n)
			}))
		}
		if c.scenarios["plain"] {
			ps = append(ps, keyed("plain"+suffix, native, func(b *bench, ctx context.Context, key string, tok int64) error {
				return b.pgxPlainNew(ctx, key, n, tok)
			}))
		}
		if c.scenarios["claimed"] {
			ps = append(ps,
				keyed("claimed"+suffix, native, func(b *bench, ctx context.Context, key string, _ int64) error {
					return b.pgxDoTx(ctx, b.store, key, n, idem.Claimed)
				}),
				keyed("claimed sql"+suffix, openOpts{}, func(b *bench, ctx context.Context, key string, _ int64) error {
					return b.doTx(ctx, b.store, key, n, idem.Claimed)
				}))
		}
	}
	if c.scenarios["replay"] {
		ps = append(ps, nativeReplayPath,
			retried("replay sql", openOpts{}, finishDoTx, func(b *bench, ctx context.Context, key string) error {
				return b.doTx(ctx, b.claimFirst, key, 1, idem.Replay)
			}))
	}
	if c.scenarios["plain"] {
		ps = append(ps, retried("plain replay", native, finishPgx, (*bench).pgxPlainReplay))
	}
	if c.scenarios["http"] {
		ps = append(ps, web("http", openOpts{pgx: true, http: true}, func(b *bench) http.Handler { return b.pgxHTTP })...)
		ps = append(ps, web("http sql", openOpts{http: true}, func(b *bench) http.Handler { return b.http })...)
	}
	if c.scenarios["lease"] {
		ps = append(ps, web("lease", openOpts{pgx: true, lease: true}, func(b *bench) http.Handler { return b.pgxLeaseHTTP })...)
	}
	return ps
}

// nativeClaimedPath and nativeReplayPath are idempgx's claimed and replay
// paths, which the settings scenario measures for the native setting.
var (
	nativeClaimedPath = keyed("claimed", openOpts{pgx: true}, func(b *bench, ctx context.Context, key string, _ int64) error {
		return b.pgxDoTx(ctx, b.store, key, 1, idem.Claimed)
	})
	nativeReplayPath = retried("replay", openOpts{pgx: true}, finishPgx, func(b *bench, ctx context.Context, key string) error {
		return b.pgxDoTx(ctx, b.claimFirst, key, 1, idem.Replay)
	})
)

// finishPgx and finishDoTx finish a key through DoTx, natively and on
// database/sql, for the replay paths; the records are the same.
func finishPgx(b *bench, ctx context.Context, key string) error {
	return b.pgxDoTx(ctx, b.store, key, 1, idem.Claimed)
}

func finishDoTx(b *bench, ctx context.Context, key string) error {
	return b.doTx(ctx, b.store, key, 1, idem.Claimed)
}

// openPool opens b's pgx pool of at most conns connections on the DSN of
// its database and, as o asks, the pgx handlers.
func (b *bench) openPool(ctx context.Context, conns int, o openOpts) error {
	cfg, err := pgxpool.ParseConfig(b.d.dsn)
	if err != nil {
		return fmt.Errorf("pgx pool: %w", err)
	}
	cfg.MaxConns = int32(conns)
	if b.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fmt.Errorf("pgx pool: %w", err)
	}
	if o.http {
		mw, err := idempgx.NewMiddleware(b.store, b.pool, pgx.TxOptions{}, idemhttp.WithSingleClient())
		if err != nil {
			return err
		}
		b.pgxHTTP = mw.Handler(b.pgxOrderHandler())
	}
	if o.lease {
		b.pgxLeaseHTTP = &leaseMiddleware{db: pgxLeases{pool: b.pool, q: b.leaseSQL}, next: b.pgxOrderHandler()}
	}
	return nil
}

// warmPool opens n connections of the pool before measuring, as open does
// for a *sql.DB.
func (b *bench) warmPool(ctx context.Context, n int) error {
	held := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, cn := range held {
			cn.Release()
		}
	}()
	for range n {
		cn, err := b.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		held = append(held, cn)
	}
	return nil
}

// pgxOrderHandler is the order handler (http.go) on the transaction that
// idempgx.Tx finds.
func (b *bench) pgxOrderHandler() http.Handler {
	return b.orderHandlerOn(func(ctx context.Context, query string, args ...any) (bool, error) {
		tx := idempgx.Tx(ctx)
		if tx == nil {
			return false, nil
		}
		_, err := tx.Exec(ctx, query, args...)
		return true, err
	})
}

// pgxEffect inserts n order rows for key in tx.
func (b *bench) pgxEffect(ctx context.Context, tx pgx.Tx, key []byte, n int) error {
	for i := range n {
		if _, err := tx.Exec(ctx, b.insert, key, int64(42+i), int64(1)); err != nil {
			return err
		}
	}
	return nil
}

// pgxDoTx runs one request through idempgx.DoTx on s, with an effect of n
// INSERTs, and expects want.
func (b *bench) pgxDoTx(ctx context.Context, s *idem.Store, key string, n int, want idem.Outcome) error {
	res, err := idempgx.New(s).DoTx(ctx, b.pool, pgx.TxOptions{}, key, reqHash[:], func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
		if want != idem.Claimed {
			return idem.Response{}, errors.New("the work ran on a replay")
		}
		return response, b.pgxEffect(ctx, tx, []byte(key), n)
	})
	if err == nil && res.Outcome != want {
		err = fmt.Errorf("outcome %v, want %v", res.Outcome, want)
	}
	return err
}

// pgxBare is the effect alone on the pool: BEGIN, the effect, COMMIT.
func (b *bench) pgxBare(ctx context.Context, key string, n int) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := b.pgxEffect(ctx, tx, []byte(key), n); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// pgxPlainClaim sends the plain claim in tx and reports whether it
// inserted the record of k.
func (b *bench) pgxPlainClaim(ctx context.Context, tx pgx.Tx, k []byte, now, token int64) (bool, error) {
	var got []byte
	err := tx.QueryRow(ctx, b.plain.claim, plainClaimArgs(k, now, token)...).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// pgxPlainNew is plainNew on the pool: BEGIN, the INSERT, the effect of n
// INSERTs, the UPDATE, COMMIT, each statement awaited before the next.
func (b *bench) pgxPlainNew(ctx context.Context, key string, n int, token int64) error {
	k := []byte(key)
	now := time.Now().UnixMicro()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	won, err := b.pgxPlainClaim(ctx, tx, k, now, token)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if !won {
		return errors.New("claim: the new key has a record")
	}
	if err := b.pgxEffect(ctx, tx, k, n); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, b.plain.complete, plainCompleteArgs(k)...)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n := tag.RowsAffected(); n != 1 {
		return fmt.Errorf("complete: %d rows", n)
	}
	return tx.Commit(ctx)
}

// pgxPlainReplay is plainReplay on the pool: BEGIN, the INSERT that
// inserts nothing, the SELECT of the record, ROLLBACK.
func (b *bench) pgxPlainReplay(ctx context.Context, key string) error {
	k := []byte(key)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	won, err := b.pgxPlainClaim(ctx, tx, k, time.Now().UnixMicro(), 0)
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
	if err := tx.QueryRow(ctx, b.plain.read, k).Scan(&hash, &status, &header, &body, &sum); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := plainFinished(hash, status); err != nil {
		return err
	}
	return tx.Rollback(ctx)
}
