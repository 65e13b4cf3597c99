package idem

import "time"

// The options that the tests of package idem_test need and the API must
// not offer.

// LeaseClock is an Option that adds offset() to the database's clock in
// every statement that sets or compares a lease, as a dialect of
// internal/testhook does for idemtest's properties. offset is called for
// each such statement, and may change between them.
func LeaseClock(offset func() time.Duration) Option {
	return func(c *config) error {
		c.leaseClock = offset
		return nil
	}
}

// PurgeHeld is an Option whose Store's Purge calls held with the keys of
// each batch after the batch's PurgeSelect has read (and, where the
// database can, locked) them and before its PurgeDelete, in the batch's
// transaction: a test does there what a claim could do meanwhile. held
// must not keep the keys it is given.
func PurgeHeld(held func(keys [][]byte)) Option {
	return func(c *config) error {
		c.purgeHeld = held
		return nil
	}
}
