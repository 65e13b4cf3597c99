package idemclient

import (
	"context"
	"time"
)

// sleep waits d, or until ctx ends, and then returns the context's cause.
// It is the wait between two attempts of a Client made by New, which its
// tests replace, together with the clock, to see the waits that Do would
// take without taking them.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
