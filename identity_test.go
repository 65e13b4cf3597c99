package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/idemgo/idem"
)

// TestIdentityCallKey pins the call keys that Run derives from a record's
// Identity, which an operator computes to tell what a provider saw
// (docs/workflows.md), and which must never change for a stored record.
func TestIdentityCallKey(t *testing.T) {
	sum := sha256.Sum256([]byte("order-1\x00charge\x00\x00\x00\x00\x00\x00\x00\x00\x2a"))
	id := idem.Identity{Key: "order-1", Incarnation: 42}
	if got, want := id.CallKey("charge"), "idem-"+hex.EncodeToString(sum[:16]); got != want {
		t.Fatalf("CallKey = %q, want %q", got, want)
	}
	old := idem.Identity{Key: "order-1", Shard: int64(7)}
	if got, want := old.CallKey("charge"), idem.CallKey("order-1", "charge"); got != want {
		t.Errorf("a record without an incarnation sends %q, want the call key from before the upgrade, %q", got, want)
	}
	next := idem.Identity{Key: "order-1", Incarnation: 43}
	if next.CallKey("charge") == id.CallKey("charge") {
		t.Error("two incarnations of one key send one call key")
	}
	neg := idem.Identity{Key: "order-1", Incarnation: -42}
	if neg.CallKey("charge") == id.CallKey("charge") {
		t.Error("an incarnation and its negation send one call key")
	}
	sharded := idem.Identity{Key: "order-1", Shard: "customer-2", Incarnation: 42}
	if sharded.CallKey("charge") != id.CallKey("charge") {
		t.Error("the shard value changed the call key; the incarnation alone tells records apart")
	}
}

// TestIdentityFrom shows that a context carries an Identity only where the
// Store put one, and that WithScope alone makes none.
func TestIdentityFrom(t *testing.T) {
	ctx := idem.WithScope(context.Background(), "client-a")
	if id, ok := idem.IdentityFrom(ctx); ok {
		t.Errorf("IdentityFrom outside a request's work = %+v, true; want false", id)
	}
}
