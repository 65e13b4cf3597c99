package idemclient

import (
	"context"
	"time"
)

// WithClock gives the Client the clock and the wait between attempts of a
// test, which sees the waits that Do asks for without taking them.
func WithClock(now func() time.Time, sleep func(context.Context, time.Duration) error) Option {
	return func(c *Client) error {
		c.now, c.sleep = now, sleep
		return nil
	}
}
