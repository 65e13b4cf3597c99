// Package testhook gives the tests of this module what the public API must
// not: a way to move the database clock that the leases of multi-step
// requests run on, so that a test sees a lease run out without waiting for
// it. Package idem fills it in when it is initialised.
package testhook

import "time"

// LeaseClock returns an idem.Option (as an any, since this package cannot
// import idem) for a Store that adds offset() to the database's clock in
// every statement that sets or compares a lease. offset is called for each
// such statement, and may change between them; a Store without the option
// adds nothing.
var LeaseClock func(offset func() time.Duration) any
