package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemclient"
)

// client sends client i's requests, one at a time, until ctx ends, or,
// with MaxOps, until it has sent that many.
func (c *campaign) client(ctx context.Context, i int) {
	for seq := 0; c.more(ctx, seq, c.cfg.MaxOps); seq++ {
		op := c.plan.ClientOp(i, seq)
		if op.Burst {
			twin := op
			twin.Twin, twin.Via = true, (op.Via+1)%len(c.procs)
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.send(ctx, twin)
			}()
			c.send(ctx, op)
			<-done
			continue
		}
		c.send(ctx, op)
		time.Sleep(10 * time.Millisecond)
	}
}

// more reports whether a client goes on to its seq-th operation: until
// ctx ends, or, when MaxOps is set, until it has sent max, whatever the
// time, so that two runs of one seed send the same operations.
func (c *campaign) more(ctx context.Context, seq, max int) bool {
	if c.cfg.MaxOps > 0 {
		return seq < max
	}
	return ctx.Err() == nil
}

// operator takes the operator's actions, one every 50 ms, until ctx ends.
func (c *campaign) operator(ctx context.Context) {
	for seq := 0; c.more(ctx, seq, c.cfg.MaxOps/4); seq++ {
		op := c.plan.OperatorOp(seq)
		if op.Stuck {
			c.pickStuck(ctx, &op)
		}
		c.hist.add(Event{Type: EvInvoke, Op: &op})
		a := c.post(context.WithoutCancel(ctx), c.procs[op.Via].base()+"/operate", op)
		c.hist.add(Event{Type: EvAnswer, Op: &op, Answer: &a})
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pickStuck points op at a request that Store.Unfinished lists, where it
// lists any: the request an operator would look at. An even Pick looks
// among those that no runner holds, whose lease ran out, as an operator
// who follows operations.md does, where there are any; an odd one among
// all, as one who acts in haste.
func (c *campaign) pickStuck(ctx context.Context, op *Op) {
	list, err := c.store.Unfinished(ctx, c.db, 0, 100)
	if err != nil || len(list) == 0 {
		return
	}
	if op.Pick%2 == 0 {
		var out []idem.Unfinished
		for _, u := range list {
			if u.LeaseLeft <= 0 {
				out = append(out, u)
			}
		}
		if len(out) > 0 {
			list = out
		}
	}
	u := list[op.Pick/2%len(list)]
	op.Stored, op.StoredShard = []byte(u.Key), u.Shard.(int64)
}

// send sends op on its surface and records it and its answer. A request
// once sent is seen through to its answer, even when the campaign's time
// is up meanwhile.
func (c *campaign) send(ctx context.Context, op Op) {
	ctx = context.WithoutCancel(ctx)
	c.hist.add(Event{Type: EvInvoke, Op: &op})
	var a Answer
	switch op.Surface {
	case SurfaceHTTP, SurfaceSteps:
		a = c.overHTTP(ctx, op)
	case SurfaceGRPC:
		a = overGRPC(ctx, c.procs[op.Via].grpcAddr(), op)
	default:
		a = c.post(ctx, c.procs[op.Via].base()+"/direct", op)
	}
	c.hist.add(Event{Type: EvAnswer, Op: &op, Answer: &a})
}

// post sends op to url as JSON and decodes its Answer; an answer that
// never came, because the service died or the connection dropped, is
// "lost".
func (c *campaign) post(ctx context.Context, url string, op Op) Answer {
	body, _ := json.Marshal(op)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	defer resp.Body.Close()
	var a Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return Answer{Outcome: "lost", Err: fmt.Sprintf("%s: %v", resp.Status, err)}
	}
	return a
}

// overHTTP sends op through idemclient to the service's idemhttp
// endpoint, and reads the answer as a client would.
func (c *campaign) overHTTP(ctx context.Context, op Op) Answer {
	req := httpRequest(c.procs[op.Via].base(), op).WithContext(ctx)
	resp, err := c.idem.Do(req)
	if err != nil {
		var he *idemclient.Error
		if errors.As(err, &he) {
			return Answer{Outcome: "error", Err: err.Error()}
		}
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	a := Answer{Status: resp.StatusCode}
	switch {
	case resp.StatusCode == http.StatusUnprocessableEntity:
		a.Outcome = "mismatch"
	case resp.StatusCode == http.StatusConflict:
		a.Outcome = "inflight"
	case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
		a.Outcome = "claimed"
		if resp.Replayed {
			a.Outcome = "replay"
		}
		a.Body = body
		a.Header = http.Header{}
		for _, h := range []string{"Content-Type", "X-Campaign-Inc"} {
			if v, ok := resp.Header[h]; ok {
				a.Header[h] = v
			}
		}
		var b Body
		if json.Unmarshal(body, &b) == nil {
			a.Inc = b.Inc
		}
		if v := resp.Header.Get("X-Campaign-Inc"); v != "" {
			a.Inc, _ = strconv.ParseInt(v, 10, 64)
		}
	default:
		a.Outcome, a.Err = "error", fmt.Sprintf("%s: %s", resp.Status, body)
	}
	return a
}
