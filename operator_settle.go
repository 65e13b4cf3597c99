package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
)

// Settle stores resp as the response of key's unfinished record, so that
// every retry of the request replays it. It is an operator's way out for a
// key that answers InFlight although no request holds it any more: the
// record of a Func that committed tx itself (see ErrTxEnded) was committed
// before its response was stored, and a multi-step request (Store.Run) may
// have been left by its runner for good. Find out first what the request
// did, and settle it with the response it would have sent.
//
// Settle works in a transaction of its own. It refuses a key with no live
// record (ErrNotFound), a finished one (ErrKeyFinished), and one that a live
// request holds (ErrKeyHeld): a transaction, after the Store's lock timeout
// where the dialect waits, or a multi-step request whose lease has not run
// out. That request is still running, and will finish or give up by itself.
// A settled multi-step request is kept for the retention window from the
// moment it is settled, as one that Run finishes is.
func (s *Store) Settle(ctx context.Context, db *sql.DB, key string, resp Response) error {
	return settle(ctx, s, sqlOn(db, nil), key, resp)
}

// settle is Settle on any driver's database.
func settle[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string, resp Response) error {
	if err := s.on(db, "database"); err != nil {
		return err
	}
	return changeRecord(ctx, s, db, key, "settle", false, func(v *values, p *progress) (statement, error) {
		if err := s.prepareResponse(v, resp); err != nil {
			return statement{}, err
		}
		if p == nil {
			return s.complete, nil
		}
		// The record of an unfinished multi-step request never expires;
		// finish sets the expiry that newValues gave v, the retention
		// from now, and keeps the recovery point.
		v.phase = p.phase
		return s.steps.finish, nil
	})
}

// ReleaseWithoutEffect deletes key's unfinished record, so that the next
// request with the key runs as a new one. Call it only when you know that
// the request's effect did not happen: if it did, the next request does the
// work a second time, the very thing this package exists to prevent. When
// the effect happened, Settle the key instead.
//
// It refuses what Settle refuses, with the same errors, and a multi-step
// request that has committed a phase (ErrPhasesCommitted), whose effects
// exist: see ReleaseUndone.
func (s *Store) ReleaseWithoutEffect(ctx context.Context, db *sql.DB, key string) error {
	return releaseWithoutEffect(ctx, s, sqlOn(db, nil), key)
}

// ReleaseUndone is ReleaseWithoutEffect for a multi-step request that has
// committed phases: it deletes the record all the same, and the next
// request with the key runs every step again, the committed phases
// included. Call it only once the effects of those phases, and of the
// calls between them, are undone, or may safely happen twice.
//
// It refuses what Settle refuses, with the same errors.
func (s *Store) ReleaseUndone(ctx context.Context, db *sql.DB, key string) error {
	return releaseUndone(ctx, s, sqlOn(db, nil), key)
}

// releaseWithoutEffect is ReleaseWithoutEffect on any driver's database.
func releaseWithoutEffect[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string) error {
	if err := s.on(db, "database"); err != nil {
		return err
	}
	return deleteUnfinished(ctx, s, db, key, false)
}

// releaseUndone is ReleaseUndone on any driver's database.
func releaseUndone[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string) error {
	if err := s.on(db, "database"); err != nil {
		return err
	}
	return deleteUnfinished(ctx, s, db, key, true)
}

// deleteUnfinished deletes key's unfinished record; past a committed phase
// only when undone says that the phases' effects are undone.
func deleteUnfinished[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string, undone bool) error {
	return changeRecord(ctx, s, db, key, "release", false, func(v *values, p *progress) (statement, error) {
		if !undone && p != nil && p.phase != "" {
			return statement{}, fmt.Errorf("idem: release: %w: it stands at step %q", ErrPhasesCommitted, p.phase)
		}
		return s.abandon, nil
	})
}

// changeRecord runs change on key's record in a transaction of its own,
// after the claim statement has made sure that no live transaction holds
// the key and that this one now does: the claim takes the key's lock (an
// advisory lock, a row lock, or SQLite's write lock) and returns the
// record. A claim that inserts because there was no record, or takes an
// expired one over, is rolled back. A multi-step request between its
// phases holds no lock, only its lease, which is checked next. Settle and
// the releases want the record unfinished (finished false), Forget wants
// it finished: a record in the other state is refused, and so is one that
// a live request holds, whichever state its record is in, so that every
// operator's action decides "held" the same way. change gets the values
// of the record's own claim (its token and request hash), which Complete
// and Abandon are guarded by, and the progress of a multi-step request,
// nil for a plain or finished record.
func changeRecord[TX any](ctx context.Context, s *Store, db driver.DB[TX], key, op string, finished bool, change func(*values, *progress) (statement, error)) error {
	if err := validateKey(key); err != nil {
		return err
	}
	shard, err := s.shardOf(ctx)
	if err != nil {
		return err
	}
	tx, _, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("idem: %s: %w", op, err)
	}
	ended := false
	defer func() {
		if !ended {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()

	// The request hash only fills the claim's insert, which is rolled back.
	v := s.newValues(key, shard, []byte{0})
	a := s.runClaim(ctx, tx, v)
	rec, claimed, busy, err := a.rec, a.claimed, a.busy, a.err
	if err == nil && !claimed && !busy && s.claimHeld.query != "" && rec != nil && rec.live(v.createdAt) {
		// The claim asked whether the key is held only where no live
		// record answered it; here a live record may be one that a
		// transaction is taking over by a later clock.
		busy, err = s.heldIn(ctx, tx, v)
	}
	if err == nil && !claimed && rec == nil && !busy {
		rec, err = s.findIn(ctx, tx, v.key, v.shard)
	}
	switch {
	case err != nil && s.d.Classify(err) == dialect.ErrorLockTimeout, busy:
		return fmt.Errorf("idem: %s: %w", op, ErrKeyHeld)
	case err != nil:
		return fmt.Errorf("idem: %s: %w", op, err)
	case claimed:
		return fmt.Errorf("idem: %s: %w", op, ErrNotFound)
	}
	switch {
	case rec == nil || !rec.live(v.createdAt):
		return fmt.Errorf("idem: %s: %w", op, ErrNotFound)
	case rec.finished && !finished:
		return fmt.Errorf("idem: %s: %w", op, ErrKeyFinished)
	}
	var p *progress
	if !rec.finished && s.steps != nil {
		if p, err = s.progress(ctx, tx, v); err != nil {
			return fmt.Errorf("idem: %s: %w", op, err)
		}
		if p != nil && p.leaseUntil > p.now {
			return fmt.Errorf("idem: %s: %w: the lease of its multi-step request runs until %s",
				op, ErrKeyHeld, time.UnixMicro(p.leaseUntil).UTC().Format(time.RFC3339Nano))
		}
	}
	if !rec.finished && finished {
		return fmt.Errorf("idem: %s: %w", op, ErrKeyUnfinished)
	}
	v.token, v.requestHash = rec.token, rec.requestHash
	st, err := change(v, p)
	if err != nil {
		return err
	}
	ended = true // CommitAfter ends the transaction, whatever it answers
	err = tx.CommitAfter(ctx, s.query(st, v))
	switch {
	case errors.Is(err, driver.ErrNoRow):
		return fmt.Errorf("idem: %s: no row changed, want 1", op)
	case err != nil:
		return fmt.Errorf("idem: %s: %w", op, err) // a *driver.CommitError says "commit:"
	}
	return nil
}
