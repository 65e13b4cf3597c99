package idem

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with [errors.Is]: idem wraps them with
// context, and with the driver's own error where there is one.
var (
	// ErrInvalidArgument is returned by New for a bad option, and by every
	// method of Store for a nil transaction, database, function or Store, or
	// a Store not made by New; every method that names a record by its key
	// returns it, before it sends anything, for a Store with a shard column
	// (WithShardColumn) whose context has no shard value, or one that the
	// column cannot hold exactly (WithShard, ShardKind); Migrate returns it
	// for such a Store whose table that was there has no shard_key, or one
	// of another type, and every method that sends a statement for one
	// whose table lacks the column; Engine.Purge returns it for a dialect that
	// purges shard by shard (dialect.ShardTargeter) on a driver whose
	// database cannot lend one connection (driver.Pinner). The adapters
	// wrap it too: idemhttp's New, NewWithRunner and options, and
	// idemgrpc's UnaryServerInterceptor, UnaryServerInterceptorWithRunner,
	// options, Reply and StoredError, for every argument they refuse.
	ErrInvalidArgument = errors.New("idem: invalid argument")

	// ErrInvalidKey is returned by Do, DoTx, Run, Lookup and the
	// operators' methods when the key is empty or longer than
	// MaxStoredKeyBytes.
	ErrInvalidKey = errors.New("idem: invalid idempotency key")

	// ErrInvalidHash is returned by Do, DoTx and Run when the request
	// hash is empty or longer than MaxHashBytes.
	ErrInvalidHash = errors.New("idem: invalid request hash")

	// ErrNotFound is returned by Lookup, Settle, the releases and Forget
	// when the key has no live record: it was never committed, it expired,
	// or it was purged.
	ErrNotFound = errors.New("idem: no record for this key")

	// ErrRetry is returned by Do when the database reports a conflict that
	// the caller's transaction cannot survive: a serialization failure, a
	// deadlock, or a busy database. The transaction is lost (on MySQL it
	// may already have been rolled back by the server): roll it back and
	// run the whole transaction again with the same key. The error also
	// wraps the driver's error. Do also returns it, without a driver's
	// error, when its completion finds the claim gone: the server ended
	// the transaction under it, and the key may belong to a duplicate
	// request by now. DoTx and Run run the transaction again themselves,
	// and return ErrRetry only when their attempts run out. Purge returns
	// it when it
	// gave a batch up, for a lock it would not wait for any longer or a
	// conflict: nothing of that batch was deleted, and a later run can
	// delete it.
	ErrRetry = errors.New("idem: conflict, retry the transaction")

	// ErrResponseTooLarge is returned by Do, DoTx and Run when the
	// response of fn (or of Run's final step) is larger than the limit set
	// by WithMaxResponseBytes. Nothing is stored; roll the transaction
	// back.
	ErrResponseTooLarge = errors.New("idem: response too large to store")

	// ErrCorruptRecord is returned by Do, DoTx, Run and Lookup when a stored
	// record does not match its checksum or cannot be decoded. The record
	// is never replayed.
	ErrCorruptRecord = errors.New("idem: stored record is corrupt")

	// ErrTxEnded is returned by Do and DoTx when the transaction had ended
	// before Do was done with it, as database/sql knows: fn committed or
	// rolled back tx, which a Func must never do, or database/sql rolled
	// it back because the context given to BeginTx was done. Both return
	// it whatever fn returned after: its response, a refusal (Refusable),
	// or an error, which the returned error matches too. If fn committed,
	// its effect and an unfinished record of the key are committed, and
	// the key answers InFlight until an operator settles or releases it
	// (Store.Settle, Store.ReleaseWithoutEffect). The error also matches
	// sql.ErrTxDone.
	ErrTxEnded = errors.New("idem: transaction ended under Do")

	// ErrKeyHeld is returned by Settle, ReleaseWithoutEffect,
	// ReleaseUndone and Forget when a live request holds the key: a
	// transaction, or the live lease of a multi-step request (Store.Run)
	// between or inside its steps. The request is still running.
	ErrKeyHeld = errors.New("idem: a live request holds the key")

	// ErrPhasesCommitted is returned by ReleaseWithoutEffect for an
	// unfinished multi-step request that has committed a phase: its
	// effects exist, and a request run anew would repeat them. Settle it,
	// or release it with ReleaseUndone once those effects are undone.
	ErrPhasesCommitted = errors.New("idem: the multi-step request has committed phases")

	// ErrKeyFinished is returned by Settle and the releases when the
	// key's request finished: its stored response is what retries get, and
	// an operator has nothing to settle.
	ErrKeyFinished = errors.New("idem: the key's request has finished")

	// ErrKeyUnfinished is returned by Forget when the key's request has
	// not finished and no live request holds it: a record left unfinished
	// by a Func that committed (see ErrTxEnded), or a multi-step request
	// whose runner has gone. Forget deletes only finished records; such a
	// key is an operator's to Settle or release (ReleaseWithoutEffect,
	// ReleaseUndone) once they know what its request did.
	ErrKeyUnfinished = errors.New("idem: the key's request has not finished")

	// ErrCommitUnknown is returned by DoTx and Run when a commit failed in
	// a way that leaves its outcome open (the connection dropped before
	// the reply) and the lookup that would have settled it failed too. The
	// effect may or may not have been committed: send the same request
	// again with the same key later, and it will either replay or run (Run
	// gives up its lease first, so that the retry need not wait for it).
	ErrCommitUnknown = errors.New("idem: commit outcome unknown")

	// ErrLeaseLost is returned by Run when the lease of its multi-step
	// request ran out and another call took the request over: the phase
	// that found it out was rolled back, and the request goes on with its
	// new runner.
	ErrLeaseLost = errors.New("idem: multi-step request taken over")

	// ErrNoSteps is returned by Run, Unfinished and Resume when the
	// Store's dialect has no statements for multi-step requests: its
	// dialect.Statements.Run is empty.
	ErrNoSteps = errors.New("idem: dialect without multi-step requests")
)

// retryError marks a driver error as one the transaction cannot survive. It
// matches both ErrRetry and the driver's error.
func retryError(op string, err error) error {
	return fmt.Errorf("idem: %s: %w: %w", op, ErrRetry, err)
}
