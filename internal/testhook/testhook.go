// Package testhook gives the tests of this module what the public API must
// not: a way to move the database clock that the leases of multi-step
// requests run on, so that a test sees a lease run out without waiting for
// it. Package idemtest, whose properties of Run need it, reaches a Store
// through the published API alone, so the way is a dialect, which idem.New
// takes apart: only this module can make one. The root's own tests set the
// same clock, and a hook into Purge, with the options of its
// export_test.go.
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
