// Package idempgx runs idem's Stores on pgx's own interface: a service that
// uses pgxpool.Pool and pgx.Tx, and never opens a *sql.DB, claims its keys
// with the same outcomes, table and contract as idem.Store's Do, DoTx and
// Run.
//
// Make the idem.Store with idem.New(idem.Postgres()), or any dialect whose
// SQL is PostgreSQL's, and New of this package makes it a Store on pgx; its
// options (table, retention, lock timeout, observers, lookup-first) apply as
// they do on database/sql, and both paths can share one table. Do claims a
// key in the caller's pgx.Tx. DoTx begins the
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
// Runner makes the idem.Runner of a pool, which idemhttp's middleware
// (NewMiddleware) and idemgrpc's interceptor
// (idemgrpc.UnaryServerInterceptorWithRunner) take alike: their handlers
// find their pgx.Tx with Tx.
//
// The package is part of idem's module, so it is always the version of the
// Store; the builds of idem's other users link no pgx, since they do not
// import it.
package idempgx
