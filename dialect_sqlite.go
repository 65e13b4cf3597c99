package idem

import "github.com/idemgo/idem/dialect"

// This file holds the built-in dialect of SQLite, as services take it, and
// what they need to know of it; its SQL is in package dialect.

// SQLite returns the dialect of SQLite 3.35 or later (for RETURNING), for
// modernc.org/sqlite.
//
// SQLite lets one transaction write at a time, so a claim never sees a key
// held by another: the second writer waits at BEGIN instead. Open the
// database with a busy timeout, so that it waits rather than fails at once,
// and with _txlock=immediate, so that every transaction takes the write lock
// when it begins rather than at its first write, where SQLite would refuse
// it to avoid a deadlock:
//
//	file:app.db?_txlock=immediate&_pragma=busy_timeout(5000)
//
// Without them, concurrent requests get SQLITE_BUSY (also in its
// SQLITE_BUSY_SNAPSHOT form under WAL), which Do returns as ErrRetry and DoTx
// retries. The lock timeout of the Store does not apply: the busy timeout is
// the wait.
func SQLite() Dialect { return dialect.SQLite() }
