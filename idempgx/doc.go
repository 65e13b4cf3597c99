// Package idempgx runs idem's Stores on pgx's own interface: a service that
// uses pgxpool.Pool and pgx.Tx, and never opens a *sql.DB, claims its keys
// with the same outcomes, table and contract as idem.Store.Do and DoTx.
//
// Make the Store with idem.New(idem.Postgres()), or any dialect whose SQL is
// PostgreSQL's; its options (table, retention, lock timeout, observers,
// lookup-first) apply as they do on database/sql, and both paths can share
// one table. Do claims a key in the caller's pgx.Tx. DoTx begins the
// transaction itself, on a pool, and sends the claim in the round trip of
// its BEGIN and the completion in the round trip of its COMMIT: a new key
// whose Func sends one statement costs three round trips in all. A retry
// of a finished request costs two (BEGIN with the claim and the read of the
// record, and ROLLBACK) with idem.LookupNever, and one read outside
// any transaction when the default policy reads first (see DoTx). The
// completion sent with COMMIT fails, and the transaction commits nothing,
// when it finds the claim gone, so that no effect commits without its
// record.
//
// The package is a module of its own, so that the pgx dependency stays out
// of the builds of idem's other users; require the same version of
// github.com/idemgo/idem and of this module.
package idempgx
