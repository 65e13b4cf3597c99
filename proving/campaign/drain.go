package campaign

import (
	"context"
	"fmt"
	"time"
)

// drain retries, as the clients' retries would, every request that was
// left without an answer that ends it, until each has one or the
// deadline passes.
func (c *campaign) drain(ctx context.Context, deadline time.Time) {
	// The Resume that a service runs every second takes a checkout left
	// by its client once resumeAge has passed: give it that time first,
	// so that the drain finds what Resume did as well.
	time.Sleep(lease + resumeAge)
	open := openIntentions(c.hist.snapshot())
	seq := 0
	for len(open) > 0 && time.Now().Before(deadline) {
		var still []Op
		for _, op := range open {
			retry := op
			retry.Client, retry.Seq, retry.Via = drainClient, seq, seq%len(c.procs)
			seq++
			if retry.Surface == SurfaceHTTP || retry.Surface == SurfaceSteps {
				retry.Surface = map[string]string{KindPay: SurfaceDoTx, KindCheckout: SurfaceRun}[KindOfKey(op.Key)]
			}
			c.send(ctx, retry)
			if !final(c.lastAnswer(retry)) {
				still = append(still, op)
			}
		}
		open = still
		if len(open) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// drainClient is the client of the drain's retries in the history.
const drainClient = -2

// lastAnswer is the answer that op got.
func (c *campaign) lastAnswer(op Op) Answer {
	events := c.hist.snapshot()
	for i := len(events) - 1; i >= 0; i-- {
		if e := events[i]; e.Type == EvAnswer && e.Op.Client == op.Client && e.Op.Seq == op.Seq {
			return *e.Answer
		}
	}
	return Answer{}
}

// final reports whether a is an answer that ends its request: the
// response, or the refusal of a request that another holds the key for.
func final(a Answer) bool {
	return a.Outcome == "claimed" || a.Outcome == "replay" || a.Outcome == "mismatch"
}

// openIntentions returns, for each request that a client sent and whose
// last answer did not end it, the operation that sent it last.
func openIntentions(events []Event) []Op {
	last := map[string]Op{}
	ended := map[string]bool{}
	var order []string
	for _, e := range events {
		if e.Type != EvAnswer || e.Op.Client < 0 {
			continue
		}
		c := call{op: *e.Op}
		id := fmt.Sprint(c.rec(), e.Op.Request)
		if _, ok := last[id]; !ok {
			order = append(order, id)
		}
		last[id], ended[id] = *e.Op, final(*e.Answer)
	}
	var ops []Op
	for _, id := range order {
		if !ended[id] {
			ops = append(ops, last[id])
		}
	}
	return ops
}
