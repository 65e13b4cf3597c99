// Package testhook gives the tests of this repository what the public API
// must not: a way to move the database clock that the leases of multi-step
// requests run on, so that a test sees a lease run out without waiting for
// it, and a hook into Purge between a batch's select and its delete. The
// tests, in the proving ground and in idemtest's properties, reach a Store
// through the published API alone, so each hook is a dialect, which
// idem.New takes apart: only packages under github.com/idemgo/idem can
// make one.
package testhook

import (
	"time"

	"github.com/idemgo/idem/dialect"
)

// LeaseClock is Dialect with the database's clock moved. Given one, idem.New
// makes a Store of Dialect that adds Offset() to the database's clock in
// every statement that sets or compares a lease: the {clock_offset} of
// dialect.RunStatements, which a statement that reads the clock adds to
// it, as the dialect's contract says. Offset is called for each such
// statement, and may change between them; a Store made without a
// LeaseClock adds nothing.
type LeaseClock struct {
	dialect.Dialect
	Offset func() time.Duration
}

// PurgeHeld is Dialect with a hook into Purge. Given one, idem.New makes a
// Store of Dialect whose Purge calls Held with the keys of each batch after
// the batch's PurgeSelect has read (and, where the database can, locked)
// them and before its PurgeDelete, in the batch's transaction: a test does
// there what a claim could do meanwhile. Held must not keep the keys it is
// given.
type PurgeHeld struct {
	dialect.Dialect
	Held func(keys [][]byte)
}
