package idempgx_test

import (
	"context"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/jackc/pgx/v5"
)

var (
	hashA   = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":88}`))
	hashB   = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":89}`))
	created = idem.Response{Status: 201, Body: []byte(`{"order":1}`)}
)

// TestDoTxRoundTrips counts the round trips of DoTx on one connection, with
// lookup-first off: a new key whose Func sends one statement takes three
// (BEGIN with the claim, the effect, the completion with COMMIT), and a
// retry of a finished request, or of a request with another hash, two
// (BEGIN with the claim, ROLLBACK). The first call on the connection
// prepares the statements, and is not counted.
func TestDoTxRoundTrips(t *testing.T) {
	e := setup(t, 1, idem.WithoutLookupFirst())
	ctx := context.Background()
	doTx := func(key string, hash []byte, fn idempgx.Func) idem.Result {
		t.Helper()
		res, err := idempgx.DoTx(ctx, e.Store, e.pool, pgx.TxOptions{}, key, hash, fn)
		if err != nil {
			t.Fatalf("DoTx %s: %v", key, err)
		}
		return res
	}
	doTx("warm-up", hashA, e.effect("warm-up", created))
	doTx("warm-up", hashA, e.effect("warm-up", created))

	for _, c := range []struct {
		name     string
		hash     []byte
		want     idem.Outcome
		maxTrips int
	}{
		{"new key", hashA, idem.Claimed, 3},
		{"retry", hashA, idem.Replay, 2},
		{"other request", hashB, idem.Mismatch, 2},
	} {
		var res idem.Result
		trips := e.trips.count(func() { res = doTx("k", c.hash, e.effect("k", created)) })
		if res.Outcome != c.want {
			t.Fatalf("%s: outcome %v, want %v", c.name, res.Outcome, c.want)
		}
		t.Logf("%s: %v in %d round trips", c.name, res.Outcome, trips)
		if trips > c.maxTrips {
			t.Errorf("%s: %d round trips, want at most %d", c.name, trips, c.maxTrips)
		}
	}
	if n := e.EffectCount(t, "k"); n != 1 {
		t.Errorf("%d effects of k, want 1", n)
	}
}
