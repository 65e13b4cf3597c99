package idem

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
)

// Polling for a busy key starts at pollMin and doubles up to pollMax.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 32 * time.Millisecond
	// maxUnsettled bounds the claims in a row that neither win nor see the
	// winner (a winner committed between two statements, a record purged
	// under the claim); each is rare, so a few more mean something is off.
	maxUnsettled = 8
)

// claimAnswer is what one round of the claim found: the record, and whether
// it claimed the key or found it held.
type claimAnswer struct {
	rec           *record
	claimed, busy bool
	err           error
}

// claimKey runs the claim until it settles: Claimed (claimed is true), or
// another outcome from the record it found. first, when it is not nil, is
// the answer of a claim already sent, with the BEGIN, which the first round
// takes instead of sending the claim again.
func (s *Store) claimKey(ctx context.Context, tx driver.Tx, v *values, first *claimAnswer) (Result, bool, error) {
	var (
		deadline time.Time
		poll     = pollMin
	)
	for unsettled := 0; unsettled < maxUnsettled; {
		var a claimAnswer
		if first != nil {
			a, first = *first, nil
		} else {
			a = s.runClaim(ctx, tx, v)
		}
		rec, claimed, busy, err := a.rec, a.claimed, a.busy, a.err
		switch {
		case err != nil && s.d.Classify(err) == dialect.ErrorLockTimeout:
			// The claim waited in vain for the transaction that holds
			// the key. A read of the record now would be no better: a
			// plain SELECT waits again under SERIALIZABLE, and under
			// READ UNCOMMITTED it sees the holder's response before
			// the holder commits, or even if it rolls back.
			return Result{Outcome: InFlight}, false, nil
		case err == nil && rec == nil && !busy:
			// Lost to a record the statement did not return, a
			// winner it could not see or an expired record it does
			// not take over: look in a statement of its own.
			rec, err = s.findIn(ctx, tx, v.key, v.shard)
			if err != nil && s.d.Classify(err) == dialect.ErrorLockTimeout {
				return Result{Outcome: InFlight}, false, nil
			}
		}
		switch {
		case err != nil:
			return Result{}, false, s.wrap("claim", err)
		case claimed:
			return s.result(Claimed, rec), true, nil
		case rec != nil && rec.live(v.createdAt):
			res, err := s.decide(v.key, v.requestHash, rec)
			return res, false, err
		case busy:
			if deadline.IsZero() {
				deadline = time.Now().Add(s.lockTimeout)
			}
			wait := time.Until(deadline)
			if wait <= 0 {
				return Result{Outcome: InFlight}, false, nil
			}
			if err := sleep(ctx, min(poll, wait)); err != nil {
				return Result{}, false, err
			}
			poll = min(2*poll, pollMax)
		case rec != nil && s.takeover.query != "":
			n, err := tx.Exec(ctx, s.takeover.query, s.takeover.args(v)...)
			if err != nil {
				return Result{}, false, s.wrap("take over expired key", err)
			}
			if n == 1 {
				return s.result(Claimed, &record{createdAt: v.createdAt, expiresAt: v.expiresAt, incarnation: v.incarnation}), true, nil
			}
			unsettled++
		default:
			unsettled++
		}
	}
	return Result{}, false, fmt.Errorf("idem: claim: %w: the key changed hands %d times in a row", ErrRetry, maxUnsettled)
}

// runClaim runs the claim once: its write, where the dialect separates it,
// then the statement that answers, the dialect's ClaimLost when that
// returned no row, and its ClaimHeld when neither found a live record.
func (s *Store) runClaim(ctx context.Context, tx driver.Tx, v *values) claimAnswer {
	if s.claimWrite.query != "" {
		if _, err := tx.Exec(ctx, s.claimWrite.query, s.claimWrite.args(v)...); err != nil {
			return claimAnswer{err: err}
		}
	}
	return s.readClaim(v, func(dest ...any) error {
		return tx.QueryRow(ctx, s.claim.query, s.claim.args(v), dest...)
	}, func(dest ...any) error {
		return tx.QueryRow(ctx, s.claimLost.query, s.claimLost.args(v), dest...)
	}, s.heldRow(ctx, tx, v))
}

// heldRow returns a scan of the row of the dialect's ClaimHeld for v
// through tx, for readClaim.
func (s *Store) heldRow(ctx context.Context, tx driver.Tx, v *values) func(dest ...any) error {
	return func(dest ...any) error {
		return tx.QueryRow(ctx, s.claimHeld.query, s.claimHeld.args(v), dest...)
	}
}

// heldIn runs the dialect's ClaimHeld for v through tx: whether another
// transaction holds the key.
func (s *Store) heldIn(ctx context.Context, tx driver.Tx, v *values) (busy bool, err error) {
	err = s.heldRow(ctx, tx, v)(&busy)
	return busy, err
}

// readClaim reads the answer of v's claim from the row that claim scans,
// and from the row of ClaimLost, which lost scans, when the claim returned
// none; a claim that answers with no row when it claimed has the record
// that it wrote, v's. Where the dialect asks for a held key in a statement
// of its own, held scans ClaimHeld's row, which tells busy when no live
// record answers the request.
func (s *Store) readClaim(v *values, claim, lost, held func(dest ...any) error) claimAnswer {
	var a claimAnswer
	a.rec, a.claimed, a.busy, a.err = s.scanClaim(claim)
	if errors.Is(a.err, sql.ErrNoRows) {
		switch {
		case s.claimedWithoutRow:
			return claimAnswer{rec: &record{createdAt: v.createdAt, expiresAt: v.expiresAt, token: v.token, incarnation: v.incarnation}, claimed: true}
		case s.claimLost.query != "":
			a.rec, a.claimed, a.busy, a.err = s.scanClaim(lost)
		}
	}
	if errors.Is(a.err, sql.ErrNoRows) {
		a = claimAnswer{}
	}
	if a.err == nil && !a.claimed && !a.busy && s.claimHeld.query != "" && (a.rec == nil || !a.rec.live(v.createdAt)) {
		a.err = held(&a.busy)
	}
	return a
}

// scanClaim reads the row of a claim statement: claimed, busy and the
// record, nil where its columns are NULL.
func (s *Store) scanClaim(scan func(dest ...any) error) (rec *record, claimed, busy bool, err error) {
	// One value holds every destination of Scan, and the list of them,
	// so that they escape to the heap together, in one allocation.
	var dst struct {
		rec                                  record
		claimed, busy                        bool
		status                               sql.NullInt64
		created, expires, token, incarnation sql.NullInt64
		list                                 [11]any
	}
	r := &dst.rec
	dst.list = [...]any{&dst.claimed, &dst.busy, &r.requestHash, &dst.status, &r.header, &r.body, &r.checksum, &dst.created, &dst.expires, &dst.token, &dst.incarnation}
	err = scan(s.withIncarnation(dst.list[:])...)
	if err != nil {
		return nil, false, false, err
	}
	if !dst.created.Valid {
		return nil, false, dst.busy, nil
	}
	r.finished, r.status = dst.status.Valid, dst.status.Int64
	r.createdAt, r.expiresAt, r.token, r.incarnation = dst.created.Int64, dst.expires.Int64, dst.token.Int64, dst.incarnation.Int64
	return r, dst.claimed, dst.busy, nil
}

// withIncarnation returns dest, the destinations of a row whose last is the
// incarnation's, without that one where the dialect's records have none:
// its statements then return no such column.
func (s *Store) withIncarnation(dest []any) []any {
	if s.incarnations {
		return dest
	}
	return dest[:len(dest)-1]
}

// rowReader reads one row: the QueryRow of a driver.Tx, all that the lookup
// statement needs, which Lookup's Querier has too (querierRow).
type rowReader interface {
	QueryRow(ctx context.Context, query string, args []any, dest ...any) error
}

// findIn runs the lookup statement for the record of key under shard, the
// shard value (nil in a table without a shard column), through q: a
// transaction, or a database outside any. No record is a nil record.
func (s *Store) findIn(ctx context.Context, q rowReader, key []byte, shard any) (*record, error) {
	return s.scanRecord(func(dest ...any) error {
		return q.QueryRow(ctx, s.lookup.query, s.lookup.args(&values{key: key, shard: shard}), dest...)
	})
}

// findFunc reads the record of a key under a shard value, for Lookup, for
// DoTx's read first and its settling of a lost commit; no record is a nil
// record.
type findFunc func(ctx context.Context, key []byte, shard any) (*record, error)

// findThrough returns the findFunc that reads through q as it is.
func (s *Store) findThrough(q rowReader) findFunc {
	return func(ctx context.Context, k []byte, shard any) (*record, error) { return s.findIn(ctx, q, k, shard) }
}

// findOutside returns the findFunc that reads through db outside any
// transaction: on a database whose sessions may read uncommitted rows, in a
// read-only transaction at READ COMMITTED where db can begin one, since a
// record that another transaction has not committed may still be rolled
// back, and must answer nothing.
func (s *Store) findOutside(db rowReader) findFunc {
	if r, ok := db.(driver.CommittedReader); ok && dialect.CapabilitiesOf(s.d).ReadsUncommitted {
		db = committedReads{r}
	}
	return s.findThrough(db)
}

// committedReads reads rows that are committed, and only those.
type committedReads struct{ r driver.CommittedReader }

func (c committedReads) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return c.r.QueryRowCommitted(ctx, query, args, dest...)
}

// scanRecord reads the row of the lookup statement, which scan scans; no
// row is a nil record.
func (s *Store) scanRecord(scan func(dest ...any) error) (*record, error) {
	// As in scanClaim, one allocation holds the destinations and their list.
	var row struct {
		rec                        record
		status, token, incarnation sql.NullInt64
		list                       [9]any
	}
	r := &row.rec
	row.list = [...]any{&r.requestHash, &row.status, &r.header, &r.body, &r.checksum, &r.createdAt, &r.expiresAt, &row.token, &row.incarnation}
	err := scan(s.withIncarnation(row.list[:])...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.finished, r.status, r.token, r.incarnation = row.status.Valid, row.status.Int64, row.token.Int64, row.incarnation.Int64
	return r, nil
}

// decide answers a request from the live record of its key. A nil
// requestHash, from Lookup, matches any.
func (s *Store) decide(key, requestHash []byte, rec *record) (Result, error) {
	switch {
	case requestHash != nil && !bytes.Equal(rec.requestHash, requestHash):
		return s.result(Mismatch, rec), nil
	case !rec.finished:
		return s.result(InFlight, rec), nil
	}
	resp, err := rec.response(key)
	if err != nil {
		return Result{}, err
	}
	res := s.result(Replay, rec)
	res.Response = resp
	return res, nil
}

func (s *Store) result(o Outcome, rec *record) Result {
	res := Result{Outcome: o, CreatedAt: time.UnixMicro(rec.createdAt), Incarnation: rec.incarnation, token: rec.token}
	if rec.expiresAt != never {
		res.ExpiresAt = time.UnixMicro(rec.expiresAt)
	}
	return res
}

// lockID derives the 64-bit lock number of the record of key under shard,
// the same in every process: of the key alone, or, in a table with a shard
// column, of the pair (dialect.ShardKind.LockBytes), so that two shard
// values' records of one key never share a lock. It leaves the table out:
// a name can be spelt several ways ("keys", "public.keys"), so a dialect
// that needs the table in its locks mixes in the database's own identity
// of it.
func (s *Store) lockID(key []byte, shard any) int64 {
	if s.sharded() {
		return dialect.LockID(s.shardKind.LockBytes(shard, key))
	}
	return dialect.LockID(key)
}

// newToken returns the token of a new claim: unique to it, and never 0,
// which marks the records written before tokens were stored.
func (s *Store) newToken() int64 {
	for {
		if t := int64(s.tokens.Add(1)); t != 0 {
			return t
		}
	}
}

// newIncarnation returns the incarnation of a record that a claim would
// create: random, from crypto/rand, so that two records of a key, whichever
// processes claimed them, share one only by a chance of about one in 2^64;
// and never 0, which marks the records created before incarnations were
// stored.
func newIncarnation() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails: it aborts the program instead (crypto/rand)
		if n := int64(binary.BigEndian.Uint64(b[:])); n != 0 {
			return n
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
