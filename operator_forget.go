package idem

import (
	"context"
	"database/sql"

	"github.com/idemgo/idem/driver"
)

// Forget deletes key's finished record before its retention window ends,
// so that the key may be sent again: the next request with it runs as a
// new request, does its work and stores its own response, where it would
// otherwise have been answered with the stored one (or refused as a
// mismatch). It is for the customer who reuses a key on purpose, once the
// first request's answer has reached them, and for whoever must remove a
// record before the purge would. A retry of the first request that arrives
// after Forget runs again: forget only a key whose client no longer
// retries it.
//
// Forget works in a transaction of its own, and decides as Settle does
// whether a live request holds the key: it refuses one that a transaction
// holds (after the Store's lock timeout where the dialect waits), and a
// multi-step request (Store.Run) whose lease has not run out, with
// ErrKeyHeld. It refuses an unfinished record that no one holds with
// ErrKeyUnfinished (Settle it, or release it, instead), and a key with no
// live record with ErrNotFound. The record is deleted only if it still
// carries the token of the finished claim that Forget read, while Forget
// holds the key's lock, so that a request that claims the key meanwhile
// is never the one deleted.
func (s *Store) Forget(ctx context.Context, db *sql.DB, key string) error {
	return forget(ctx, s, sqlOn(db, nil), key)
}

// forget is Forget on any driver's database. Abandon, guarded by the
// record's own token, deletes it: a finished record keeps the token of the
// claim that completed it, and no other record of the key can carry it.
func forget[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string) error {
	if err := s.on(db, "database"); err != nil {
		return err
	}
	return changeRecord(ctx, s, db, key, "forget", true, func(*values, *progress) (statement, error) {
		return s.abandon, nil
	})
}
