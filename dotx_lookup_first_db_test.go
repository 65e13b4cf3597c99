package idem_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/idemgo/idem"
)

// TestLookupFirstAdapts counts what DoTx sends on every database while a
// Store of the default policy sees its traffic change: a new key and its
// first 31 retries go through the transaction as they would without the
// policy; once the Store has seen 32 calls, most of them retries, a retry
// is the lookup alone, with no BEGIN, and a new key the lookup and then the
// claim; after a run of new keys it stops reading first. What each call
// sends must match what LooksUpFirst said before it, and an answer from the
// lookup must show in the Event as no attempt. A Store made
// LookupNever on the same table never reads first, however many
// retries it answers.
func TestLookupFirstAdapts(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e, c := countStatements(t, tg)
		ctx := context.Background()
		var last idem.Event
		// The default policy: only the table and an observer are set.
		store, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithObserver(func(_ context.Context, ev idem.Event) { last = ev }))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		// call runs DoTx on s and returns what it sent, and what
		// LooksUpFirst said just before.
		call := func(s *idem.Store, key string, hash []byte, want idem.Outcome) (sent []string, first bool) {
			t.Helper()
			fn := mustNotRun(t)
			if want == idem.Claimed {
				fn = e.Effect(key, created)
			}
			first = s.LooksUpFirst()
			c.take()
			res, err := s.DoTx(ctx, e.DB, nil, key, hash, fn)
			sent, _ = c.take()
			wantOutcome(t, res, err, want)
			if s == store {
				calls++
				// A retry answered by the lookup ran no transaction.
				wantAttempts := 1
				if first && want != idem.Claimed {
					wantAttempts = 0
				}
				if last.Attempts != wantAttempts {
					t.Fatalf("call %d (%v, looked up first %v): Event.Attempts %d, want %d", calls, want, first, last.Attempts, wantAttempts)
				}
			}
			return sent, first
		}
		wantSent := func(what string, sent, want []string) {
			t.Helper()
			if !reflect.DeepEqual(sent, want) {
				t.Fatalf("call %d, %s: DoTx sent %v, want %v", calls, what, sent, want)
			}
		}

		// A new key, through the transaction: the path to compare with.
		claimTx, first := call(store, "k", hashA, idem.Claimed)
		if first || len(claimTx) == 0 || claimTx[0] != "begin" {
			t.Fatalf("a new Store's first DoTx: looks up first %v, sent %v; want a transaction", first, claimTx)
		}
		// Its retries, and requests with another body under the same key,
		// all through the transaction until the Store has seen 32 calls.
		var retryTx []string
		for calls < 32 {
			hash, want := hashA, idem.Replay
			if calls%2 == 0 {
				hash, want = hashB, idem.Mismatch
			}
			sent, first := call(store, "k", hash, want)
			if first {
				t.Fatalf("call %d: looks up first before the Store saw 32 calls", calls)
			}
			if retryTx == nil {
				retryTx = sent
				if len(sent) == 0 || sent[0] != "begin" {
					t.Fatalf("call %d, a retry through the transaction: DoTx sent %v", calls, sent)
				}
			}
			wantSent("a retry through the transaction", sent, retryTx)
		}
		if !store.LooksUpFirst() {
			t.Fatalf("after a new key and 31 retries: does not look up first")
		}

		// Now a retry is the lookup alone, and so is another body.
		for _, r := range []struct {
			hash []byte
			want idem.Outcome
		}{{hashA, idem.Replay}, {hashB, idem.Mismatch}} {
			sent, first := call(store, "k", r.hash, r.want)
			if !first {
				t.Fatalf("call %d: does not look up first", calls)
			}
			wantSent("a retry answered by the lookup", sent, []string{"Lookup"})
		}

		// New keys pay the lookup on top of the transaction, until the
		// estimate falls to 0.3: from about 0.88, in some 17 new keys.
		fresh := 0
		for store.LooksUpFirst() {
			if fresh++; fresh > 25 {
				t.Fatalf("still looks up first after %d new keys", fresh-1)
			}
			key := "new-" + string(rune('a'+fresh))
			sent, _ := call(store, key, hashA, idem.Claimed)
			wantSent("a new key after the lookup", sent, slices.Concat([]string{"Lookup"}, claimTx))
		}
		t.Logf("looked up first from call 33 on, and stopped after %d new keys", fresh)
		if fresh < 10 {
			t.Errorf("stopped looking up first after %d new keys, want some 17", fresh)
		}

		// And the transaction again, for new keys and retries alike.
		sent, _ := call(store, "after", hashA, idem.Claimed)
		wantSent("a new key after the Store stopped looking up first", sent, claimTx)
		sent, _ = call(store, "k", hashA, idem.Replay)
		wantSent("a retry after the Store stopped looking up first", sent, retryTx)

		// LookupNever never reads first.
		never, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithLookupFirst(idem.LookupNever))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64; i++ {
			sent, first := call(never, "k", hashA, idem.Replay)
			if first {
				t.Fatalf("LookupNever, retry %d: looks up first", i+1)
			}
			wantSent("a retry on a Store of LookupNever", sent, retryTx)
		}
		if never.LooksUpFirst() {
			t.Fatal("LookupNever: looks up first after 64 retries")
		}
	})
}
