package idemtest

import (
	"context"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// testTakeoverChecksExpiry sends the dialect's Takeover statement, as the
// Store sends it, in a transaction of the Driver, against a live record: it
// must change nothing. A takeover
// that does not check the expiry itself lets a claimer that saw the key
// expired replace the record of another that took the key over a moment
// before, and both run the effect. Where writers take turns (SQLite) that
// race cannot be staged, so the statement is asked directly.
func testTakeoverChecksExpiry(t *testing.T, s *suite) {
	e := s.env(t)
	q, ok := e.store.Queries()["Takeover"]
	if !ok {
		t.Skip("the dialect's claim takes expired records over itself: it has no Takeover statement")
	}
	res, err := e.do(t, "k", hashA, e.effect("k", created), true)
	wantOutcome(t, res, err, idem.Claimed)
	now := time.Now()
	args := make([]any, len(q.Params))
	for i, p := range q.Params {
		switch p {
		case "key":
			args[i] = []byte("k")
		case "request_hash":
			args[i] = hashB
		case "created_at":
			args[i] = now.UnixMicro()
		case "expires_at":
			args[i] = now.Add(time.Hour).UnixMicro()
		case "token":
			args[i] = int64(7)
		case "incarnation":
			args[i] = int64(4711)
		default:
			t.Fatalf("the takeover binds {%s}", p)
		}
	}
	ctx := context.Background()
	tx := e.begin(t, nil)
	n, err := tx.Exec(ctx, q.SQL, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the takeover of a live record changed %d rows, want 0: it must check that the record expired", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	looked, err := e.store.Lookup(ctx, e.db, "k")
	wantOutcome(t, looked, err, idem.Replay)
	sameResponse(t, looked.Response, created)
}
