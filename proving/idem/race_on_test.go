//go:build race

package idem_test

// raceDetector is whether the tests run under the race detector, which
// makes sync.Pool drop items at random, so that allocations are not counted
// the same from run to run.
const raceDetector = true
