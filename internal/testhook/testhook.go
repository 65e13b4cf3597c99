// Package testhook gives the tests of this module what the public API must
// not: a way to move the database clock that the leases of multi-step
// requests run on, so that a test sees a lease run out without waiting for
// it, and a way into a purge's batch while it holds its records. Package
// idem fills it in when it is initialised.
package testhook

import "time"

// LeaseClock returns an idem.Option (as an any, since this package cannot
// import idem) for a Store that adds offset() to the database's clock in
// every statement that sets or compares a lease. offset is called for each
// such statement, and may change between them; a Store without the option
// adds nothing.
var LeaseClock func(offset func() time.Duration) any

// PurgeHeld returns an idem.Option (as an any) for a Store whose Purge
// calls held with the keys of each batch after the batch's PurgeSelect has
// read (and, where the database can, locked) them and before its
// PurgeDelete, in the batch's transaction: a test does there what a claim
// could do meanwhile. held must not keep the keys it is given.
var PurgeHeld func(held func(keys [][]byte)) any
