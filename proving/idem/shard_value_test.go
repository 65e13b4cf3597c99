package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// The tests of this file show how a store with a shard column names a
// record by a shard value that its column cannot hold as it is given, or
// compares as equal to another: whatever the column's type, one request's
// record must never answer another shard value's request, and a value the
// column cannot hold must be refused before the Func runs, or kept as it
// is.

// shardStore makes, on tg, a store with opts and a shard column of kind on
// a table of its own, dropped at the end of t. On Vitess the
// table is sharded by its key, as Setup shards it, so that the records of
// one key under every shard value are on one shard: the tests then see how
// the column compares shard values, not where the vindex puts them.
func shardStore(t *testing.T, tg target, kind idem.ShardKind, opts ...idem.Option) *dbtest.Env {
	t.Helper()
	return tg.Setup(t, append([]idem.Option{idem.WithShardColumn(kind)}, opts...)...)
}

// tenantResponse is the response of tenant's request: its body names the
// tenant, so that a replay of another tenant's response shows.
func tenantResponse(tenant string) idem.Response {
	return idem.Response{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(fmt.Sprintf("{\"tenant\":%q}\x00\xff", tenant)),
	}
}

// countingFunc is a Func that adds one to *runs each time it runs and
// answers resp.
func countingFunc(runs *int, resp idem.Response) idem.Func {
	return func(context.Context, *sql.Tx) (idem.Response, error) {
		*runs++
		return resp, nil
	}
}

// TestShardValueLongerThanColumn gives a text shard column of 8 bytes
// (idem.ShardText(8)) a value of 13 whose first 8 another tenant's value shares. The store
// either refuses the value before the Func runs, or keeps it whole: the
// request is claimed once and replayed byte for byte, and the other
// tenant's request of the same key is a record of its own. A claim that
// the database cuts to the column's width names another record than the
// one the store then reads, and must show neither as ErrRetry, nor as a
// second run of the Func, nor as the other tenant's response.
func TestShardValueLongerThanColumn(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		e := shardStore(t, tg, idem.ShardText(8))
		bg := context.Background()
		const key = "order-1"
		tenants := []string{"tenant-long-1", "tenant-long-2"}
		runs := make([]int, len(tenants))

		// do runs tenant i's request and says whether the store refused
		// its value; any other error or outcome than a claim fails t.
		do := func(i int) (refused bool) {
			t.Helper()
			res, err := e.Store.DoTx(idem.WithShard(bg, tenants[i]), e.DB, nil, key, dbtest.HashA, countingFunc(&runs[i], tenantResponse(tenants[i])))
			switch {
			case errors.Is(err, idem.ErrInvalidArgument):
				if runs[i] != 0 {
					t.Errorf("%s: refused with ErrInvalidArgument after the Func ran %d times, want it refused before", tenants[i], runs[i])
				}
				return true
			case errors.Is(err, idem.ErrRetry):
				t.Fatalf("%s: ErrRetry (%v) after %d runs of the Func, want Claimed or ErrInvalidArgument", tenants[i], err, runs[i])
			case err != nil:
				t.Fatalf("%s: %v after %d runs of the Func, want Claimed or ErrInvalidArgument", tenants[i], err, runs[i])
			case res.Outcome != idem.Claimed:
				if res.Outcome == idem.Replay && i > 0 {
					t.Fatalf("%s: Replay of %q, want a claim of its own: another tenant's record answered it", tenants[i], res.Response.Body)
				}
				t.Fatalf("%s: outcome %v, want Claimed", tenants[i], res.Outcome)
			}
			if runs[i] != 1 {
				t.Errorf("%s: the Func ran %d times, want once", tenants[i], runs[i])
			}
			dbtest.SameResponse(t, res.Response, tenantResponse(tenants[i]))
			return false
		}
		// replay runs tenant i's request again, which must replay its
		// own response without running the Func.
		replay := func(i int) {
			t.Helper()
			res, err := e.Store.DoTx(idem.WithShard(bg, tenants[i]), e.DB, nil, key, dbtest.HashA, countingFunc(&runs[i], tenantResponse(tenants[i])))
			if err != nil {
				t.Fatalf("%s again: %v, want Replay", tenants[i], err)
			}
			if res.Outcome != idem.Replay {
				t.Fatalf("%s again: outcome %v, want Replay", tenants[i], res.Outcome)
			}
			if runs[i] != 1 {
				t.Errorf("%s again: the Func has run %d times, want once", tenants[i], runs[i])
			}
			dbtest.SameResponse(t, res.Response, tenantResponse(tenants[i]))
		}

		if do(0) {
			if !do(1) {
				t.Fatalf("%s was refused and %s claimed: want both refused, their values are as long", tenants[0], tenants[1])
			}
			return
		}
		replay(0)
		if do(1) {
			t.Fatalf("%s was claimed and %s refused: want both claimed, their values are as long", tenants[0], tenants[1])
		}
		replay(1)
		replay(0)
	})
}

// TestShardValueNotAnInteger gives a bigint shard column the string
// "42.7", under a key that customer 43 has a record of: the store must
// refuse the value as no integer before the Func runs, and never answer
// with customer 43's record, as a server that rounds it to 43 would; under
// a new key as well.
func TestShardValueNotAnInteger(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		e := shardStore(t, tg, idem.ShardInt64())
		bg := context.Background()
		owner := tenantResponse("customer 43")
		var ownerRuns int
		c43 := idem.WithShard(bg, int64(43))
		res, err := e.Store.DoTx(c43, e.DB, nil, "order-1", dbtest.HashA, countingFunc(&ownerRuns, owner))
		dbtest.WantOutcome(t, res, err, idem.Claimed)

		odd := idem.WithShard(bg, "42.7")
		for _, key := range []string{"order-1", "order-2"} {
			var runs int
			res, err := e.Store.DoTx(odd, e.DB, nil, key, dbtest.HashA, countingFunc(&runs, tenantResponse("42.7")))
			switch {
			case err == nil && res.Outcome == idem.Replay:
				t.Errorf("%s with shard value \"42.7\": Replay of %q, want ErrInvalidArgument: another customer's record answered it", key, res.Response.Body)
			case errors.Is(err, idem.ErrRetry):
				t.Errorf("%s with shard value \"42.7\": ErrRetry (%v), want ErrInvalidArgument", key, err)
			case err == nil:
				t.Errorf("%s with shard value \"42.7\": outcome %v, want ErrInvalidArgument", key, res.Outcome)
			case !errors.Is(err, idem.ErrInvalidArgument):
				t.Errorf("%s with shard value \"42.7\": %v, want ErrInvalidArgument", key, err)
			}
			if runs != 0 {
				t.Errorf("%s with shard value \"42.7\": the Func ran %d times, want never", key, runs)
			}
		}

		res, err = e.Store.DoTx(c43, e.DB, nil, "order-1", dbtest.HashA, countingFunc(&ownerRuns, owner))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, owner)
		if ownerRuns != 1 {
			t.Errorf("customer 43's Func ran %d times, want once", ownerRuns)
		}
	})
}

// TestShardValueComparedAsBytes stores tenant-a's response under a key,
// then sends the same key under shard values that a text column's
// collation may compare as equal to "tenant-a": in another case, with an
// accent, and with a trailing space. Shard values are names, compared byte
// for byte: each is a record of its own, claimed and replayed with its own
// response, and tenant-a's is left as it was.
func TestShardValueComparedAsBytes(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		e := shardStore(t, tg, idem.ShardText(64))
		bg := context.Background()
		const key = "order-1"
		first := "tenant-a"
		var firstRuns int
		res, err := e.Store.DoTx(idem.WithShard(bg, first), e.DB, nil, key, dbtest.HashA, countingFunc(&firstRuns, tenantResponse(first)))
		dbtest.WantOutcome(t, res, err, idem.Claimed)

		for _, c := range []struct{ name, value string }{
			{"case", "TENANT-a"},
			{"accent", "ténant-a"},
			{"trailing-space", "tenant-a "},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx := idem.WithShard(bg, c.value)
				var runs int
				res, err := e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, countingFunc(&runs, tenantResponse(c.value)))
				if err != nil {
					t.Fatalf("%q: %v, want Claimed", c.value, err)
				}
				if res.Outcome == idem.Replay {
					t.Fatalf("%q: Replay of %q, want Claimed: %q's record answered it", c.value, res.Response.Body, first)
				}
				if res.Outcome != idem.Claimed {
					t.Fatalf("%q: outcome %v, want Claimed", c.value, res.Outcome)
				}
				dbtest.SameResponse(t, res.Response, tenantResponse(c.value))
				res, err = e.Store.DoTx(ctx, e.DB, nil, key, dbtest.HashA, countingFunc(&runs, tenantResponse(c.value)))
				dbtest.WantOutcome(t, res, err, idem.Replay)
				dbtest.SameResponse(t, res.Response, tenantResponse(c.value))
				if runs != 1 {
					t.Errorf("%q: the Func ran %d times, want once", c.value, runs)
				}
			})
		}

		res, err = e.Store.DoTx(idem.WithShard(bg, first), e.DB, nil, key, dbtest.HashA, countingFunc(&firstRuns, tenantResponse(first)))
		dbtest.WantOutcome(t, res, err, idem.Replay)
		dbtest.SameResponse(t, res.Response, tenantResponse(first))
		if firstRuns != 1 {
			t.Errorf("%q: the Func ran %d times, want once", first, firstRuns)
		}
	})
}

// TestShardValueOwnLock shows that records of one key under two shard
// values are two records with locks of their own: while customer 1's claim
// of a key is open in a transaction, customer 2's claim of the key in
// another transaction is claimed at once, not kept waiting behind customer
// 1's until the lock timeout and answered InFlight. Both then commit, and
// each replays its own response.
func TestShardValueOwnLock(t *testing.T) {
	forEachShardTarget(t, func(t *testing.T, tg target) {
		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			t.Skip("the database runs one writing transaction at a time: a second claim waits at BEGIN whatever its shard value")
		}
		e := shardStore(t, tg, idem.ShardInt64(), idem.WithLockTimeout(2*time.Second))
		bg := context.Background()
		const key = "order-1"
		customers := []int64{1, 2}
		runs := make([]int, len(customers))
		resp := func(i int) idem.Response { return tenantResponse(fmt.Sprintf("customer %d", customers[i])) }

		txs := make([]*sql.Tx, len(customers))
		for i, c := range customers {
			txs[i] = e.Begin(t, nil)
			what := fmt.Sprintf("customer %d's claim of %s", c, key)
			if i > 0 {
				what += fmt.Sprintf(" while customer %d's is open", customers[0])
			}
			res, err := e.Store.Do(idem.WithShard(bg, c), txs[i], key, dbtest.HashA, countingFunc(&runs[i], resp(i)))
			if err != nil {
				t.Fatalf("%s: %v, want Claimed", what, err)
			}
			if res.Outcome != idem.Claimed {
				t.Fatalf("%s: outcome %v, want Claimed", what, res.Outcome)
			}
			dbtest.SameResponse(t, res.Response, resp(i))
		}
		for i, tx := range txs {
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit of customer %d's claim: %v", customers[i], err)
			}
		}
		for i, c := range customers {
			res, err := e.Store.DoTx(idem.WithShard(bg, c), e.DB, nil, key, dbtest.HashA, countingFunc(&runs[i], resp(i)))
			dbtest.WantOutcome(t, res, err, idem.Replay)
			dbtest.SameResponse(t, res.Response, resp(i))
			if runs[i] != 1 {
				t.Errorf("customer %d's Func ran %d times, want once", c, runs[i])
			}
		}
	})
}
