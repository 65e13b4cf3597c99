//go:build !race

package idem_test

// raceDetector: see race_on_test.go.
const raceDetector = false
