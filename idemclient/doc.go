// Package idemclient is the client half of idempotency keys: an HTTP
// client that makes one key per intention and sends it, with the same
// request, on every retry, so that a request whose answer was lost can be
// sent again without its work happening twice.
//
// A key made per attempt is a request id, not an idempotency key: the
// server cannot tell the retry from a new request, and the work happens
// once per attempt. Client.Do makes the key once, before the first attempt
// (or takes the request's own), and retries only what the key makes safe
// and what may succeed: an attempt that got no answer, and the answers
// that say to come back (idemhttp's in-flight, conflict, unfinished and
// outcome-unknown, 429, 502, 503 and 504). It waits between attempts with
// capped exponential back-off and full jitter, or as long as the server's
// Retry-After asks, and stops at a number of attempts, a time, and the
// context's deadline. When it stops on an answer that asks for another
// attempt, a Retry-After past the time among them, it returns that answer
// at once, without the wait, and Response.GaveUp says which limit it met
// (ErrMaxAttempts, ErrMaxElapsed, context.DeadlineExceeded): the intention
// is still open under its key.
//
//	c, err := idemclient.New(idemclient.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
//	...
//	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(order))
//	req.Header.Set("Idempotency-Key", order.Key) // made once, with idemclient.NewKey, and kept with the order
//	resp, err := c.Do(req)
//	if err != nil {
//		return err // no answer, and resp is nil: retry later with the same key
//	}
//	defer resp.Body.Close()
//	if resp.GaveUp != nil {
//		return resp.GaveUp // the answer asks to come back: retry later with resp.Key
//	}
//	// resp.Attempts, resp.Replayed
//
// The package uses the standard library only.
package idemclient
