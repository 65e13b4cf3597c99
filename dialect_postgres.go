package idem

import "github.com/idemgo/idem/dialect"

// This file holds the built-in dialect of PostgreSQL, as services take it,
// and what they need to know of it; its SQL is in package dialect.

// Postgres returns the dialect of PostgreSQL 12 or later, for lib/pq and for
// pgx (through its database/sql driver, or package idempgx).
//
// The claim is one INSERT that takes a transaction-level advisory lock on
// the key (pg_try_advisory_xact_lock, numbered from a hash of table and key)
// without waiting, and only then inserts. A key held by another transaction
// therefore never blocks the statement, never aborts the caller's
// transaction and needs no savepoint and no lock_timeout: Do sees it busy
// and asks again, briefly, until the lock timeout passes. A new key costs
// that INSERT; a key that has a record costs one more statement, which
// reads it, and a key whose record is missing or expired one more, which
// asks for the lock.
//
// On Citus, through its coordinator, with the table distributed by key
// (docs/scaling.md), every advisory lock is taken on the coordinator: in
// the claim's INSERT, whose filter reads no column, and in statements that
// read no table; a read of the distributed table goes to the worker that
// holds the row, and takes none.
//
// Under REPEATABLE READ and SERIALIZABLE, a key claimed by a transaction that
// committed after the caller's snapshot was taken fails with SQLSTATE 40001,
// which Do returns as ErrRetry: the caller's transaction is aborted and must
// run again.
func Postgres() Dialect { return dialect.Postgres() }
