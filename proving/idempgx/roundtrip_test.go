package idempgx_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
)

var (
	hashA   = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":88}`))
	hashB   = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":89}`))
	created = idem.Response{Status: 201, Body: []byte(`{"order":1}`)}
)

// TestDoTxRoundTrips counts the round trips of DoTx on one connection. With
// lookup-first off (LookupNever), a new key whose Func sends one
// statement takes three (BEGIN with the claim, the effect, the completion
// with COMMIT), and a retry of a finished request, or of a request with
// another hash, two (BEGIN with the claim and ClaimLost, ROLLBACK). With the
// default policy, while retries are rare and so lookup-first is off, the
// claim goes without ClaimLost: a new key still takes three, and a retry
// three (ClaimLost on its own). The first calls on the connection prepare
// the statements, and are not counted.
func TestDoTxRoundTrips(t *testing.T) {
	for _, c := range []struct {
		policy               string
		opt                  idem.Option
		newKey, retry, other int
	}{
		{"without lookup-first", idem.WithLookupFirst(idem.LookupNever), 3, 2, 2},
		{"default", nil, 3, 3, 3},
	} {
		t.Run(c.policy, func(t *testing.T) {
			e := setup(t, 1, c.opt)
			countRoundTrips(t, e, []tripCase{
				{"new key", hashA, idem.Claimed, c.newKey},
				{"retry", hashA, idem.Replay, c.retry},
				{"other request", hashB, idem.Mismatch, c.other},
			})
		})
	}
}

// tripCase is one call of countRoundTrips: its request hash, the outcome it
// must get, and the round trips it may take.
type tripCase struct {
	name     string
	hash     []byte
	want     idem.Outcome
	maxTrips int
}

// countRoundTrips sends the cases in order, with key "k", after warming
// the connection up with every statement they send.
func countRoundTrips(t *testing.T, e *env, cases []tripCase) {
	ctx := context.Background()
	doTx := func(key string, hash []byte, fn idempgx.Func) idem.Result {
		t.Helper()
		res, err := idempgx.New(e.Store).DoTx(ctx, e.pool, pgx.TxOptions{}, key, hash, fn)
		if err != nil {
			t.Fatalf("DoTx %s: %v", key, err)
		}
		return res
	}
	doTx("warm-up", hashA, e.effect("warm-up", created))
	doTx("warm-up", hashA, e.effect("warm-up", created))
	for _, c := range cases {
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
