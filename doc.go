// Package idem makes retries safe: a request that carries an idempotency key
// does its work at most once, however often the client sends it.
//
// A client that lost a response cannot know whether the work was done, so it
// asks again with the same key, made once per intention and reused on every
// retry. The server keeps the key with a hash of the request in the same
// database and the same transaction as the effect the key protects, so the
// key and the effect commit together or not at all: there is no moment when
// one exists without the other.
//
// # The life of a key
//
// [Store.Do] takes the caller's transaction, the key, the request's hash and
// the work to protect, and answers one of four outcomes:
//
//   - [Claimed]: the key was free. The work ran in the transaction, and its
//     response was stored there too. Commit, and send the response.
//   - [Replay]: a request with this key and the same hash finished earlier.
//     Send its stored response, which is the original byte for byte.
//   - [Mismatch]: the key was used with a different request. That is a client
//     bug or an attack, never a retry: HTTP 422.
//   - [InFlight]: another transaction holds the key and did not finish within
//     the lock timeout: HTTP 409, try again later.
//
// [Store.DoTx] does the same in a transaction of its own, retries conflicts
// that the database asks to retry, and settles a commit whose reply was lost.
// While retries of finished requests are frequent, it reads the key first
// and answers such a retry from that one read, before any transaction, and a
// new key then costs the read on top; [WithLookupFirst] fixes when it does
// (see [LookupPolicy] for the rule), and the read changes what an answer
// costs, never the answer.
//
// The work must return the errors of its statements and leave the
// transaction to its caller. Everything Do sends after the work is guarded by
// its own claim, so that a transaction the database ended under it (a
// deadlock victim on MySQL or MariaDB, an interrupted statement on SQLite) can never
// overwrite or delete the record of a duplicate request: Do returns [ErrRetry]
// instead, and the retry replays the duplicate's response. A key left
// unfinished by work that committed its transaction itself is settled with
// [Store.Settle].
//
// # Requests that call other systems
//
// [Store.Run] is for a request that must call another system in the middle
// of its work, such as a payment provider: its steps are phases ([Phase],
// [Final]), each committed in a transaction of its own with the request's
// recovery point, and calls ([Call]) between them, each given a call key
// of the request's record ([Identity.CallKey]) for the other system to
// deduplicate by. A retry resumes after the last committed phase. A lease ([WithLease]) keeps
// one runner at a time, and a runner whose lease was taken over can commit
// no phase ([ErrLeaseLost]).
//
// # The retention window
//
// A record counts for the retention window after its key was claimed: 24
// hours unless [WithRetention] says otherwise, judged by the Store's clock. A
// retry within the window replays; a request after it runs again as a new
// request. The window is part of an API's contract with its clients, so
// publish it. [Store.Purge] deletes expired records, and [Store.Stats]
// counts the live, in-flight and expired ones.
//
// # Databases
//
// [Postgres], [MySQL] (MySQL 8 and later, MariaDB, TiDB), [MariaDB] (MariaDB
// only, in fewer statements) and [SQLite] are the built-in dialects; a
// [Dialect] for another database is a small interface. The package imports
// no driver: open the database with the driver you use (lib/pq, pgx's stdlib,
// go-sql-driver/mysql, modernc.org/sqlite). docs/contract.md in the
// repository lists what each database blocks and aborts, and the settings
// each needs.
package idem
