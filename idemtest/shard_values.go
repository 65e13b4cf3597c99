package idemtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/placement"
)

// The properties of shard values of each kind (idem.ShardKind): a value
// that the column cannot hold exactly is refused before a statement is
// sent; every value that it can hold names a record of its own, compared
// byte for byte; and, where the dialect takes locks of its own, a record's
// lock is its pair's. They run on stores of every kind, without orders.

// kindCase is a kind of shard column, with values of it that are each a
// record of their own, and values that the column cannot hold.
type kindCase struct {
	kind     idem.ShardKind
	distinct []any // each a shard value of a record of its own
	refused  []any // each refused with ErrInvalidArgument
}

// kindCases are the kinds that the properties try, with values at their
// edges: the extremes of an int64; a text of exactly its bytes in
// multi-byte UTF-8, and the variants of case, accent and trailing space
// that a collation would fold or pad; byte strings that differ only in
// trailing zero bytes; a UUID beside its neighbour.
var kindCases = []kindCase{
	{
		kind:     idem.ShardInt64(),
		distinct: []any{int64(0), int64(-1), int64(1), int64(math.MinInt64), int64(math.MaxInt64), int64(43)},
		refused:  []any{"42", "42.7", 42.7, uint64(math.MaxUint64), []byte("42"), true},
	},
	{
		kind: idem.ShardText(16),
		distinct: []any{"tenant-a", "TENANT-a", "ténant-a", "tenant-a ", "tenant-á", "",
			" ", "éééééééé" /* 16 bytes */, "eeeeeeee"},
		refused: []any{"tenant-aaaaaaaaa1" /* 17 bytes */, "éééééééé-" /* 17 bytes */, "ten\x00ant", "\xff\xfe", 7, []byte("tenant-a")},
	},
	{
		kind:     idem.ShardBytes(8),
		distinct: []any{[]byte{}, []byte{0}, []byte{0, 0}, []byte{0xff}, []byte("AbCdEfGh")},
		refused:  []any{[]byte("AbCdEfGhI"), []byte(nil), "AbCd", int64(1)},
	},
	{
		kind: idem.ShardUUID(),
		distinct: []any{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430c9",
			"00000000-0000-0000-0000-000000000000"},
		refused: []any{"6ba7b8109dad11d180b400c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430c", "6ba7b810-9dad-11d1-80b4-00c04fd430cg",
			"{6ba7b810-9dad-11d1-80b4-00c04fd430c8}", []byte("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), int64(1)},
	},
}

// kindStore makes a store with a shard column of kind and opts on a table
// of its own, or skips the property for a dialect that cannot make one, as
// shardEnv does. The table is sharded by shard_key with Vitess's vindex,
// and distributed by it on Citus.
func (s *suite) kindStore(t *testing.T, kind idem.ShardKind, opts ...idem.Option) storeTable {
	t.Helper()
	if _, ok := s.d.(dialect.ShardColumn); !ok {
		if _, err := idem.New(s.d, idem.WithShardColumn(kind)); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("New with a shard column, on a dialect without dialect.ShardColumn: %v, want ErrInvalidArgument", err)
		}
		t.Skip("the dialect does not implement dialect.ShardColumn: New refuses a Store with idem.WithShardColumn (ErrInvalidArgument)")
	}
	st := newStore(t, s.d, s.db, "idem_"+randomName(), append([]idem.Option{idem.WithShardColumn(kind)}, opts...)...)
	switch {
	case placement.Sharded(s.d):
		placement.AddVindex(t, s.db, st.table, "shard_key")
	case s.distributed:
		placement.Distribute(t, s.db, st.table, "shard_key", "")
	}
	return st
}

// answer returns a Func that answers a response naming what, and counts
// its runs in n.
func answer(what string, n *int) Func {
	return func(context.Context, Tx) (idem.Response, error) {
		*n++
		return idem.Response{Status: 201, Body: []byte(what)}, nil
	}
}

// testShardValueRefused gives each kind's store values that its column
// cannot hold exactly, of another Go type, too long, out of range, not
// valid text, not a UUID: Do, DoTx, Run and Lookup refuse each with
// ErrInvalidArgument before they send a statement (Do on a transaction
// that has ended, which any statement would find), never running the
// Func or a step, never answering another record's response, never asking
// for a retry. Run is tried where the dialect has statements of multi-step
// requests: without them it answers ErrNoSteps whatever the shard value.
func testShardValueRefused(t *testing.T, s *suite) {
	for _, c := range kindCases {
		t.Run(c.kind.String(), func(t *testing.T) {
			e := s.kindStore(t, c.kind)
			ran := 0
			res, err := s.doWith(idem.WithShard(context.Background(), c.distinct[0]), t, e.store, "k", hashA, answer("first", &ran), true)
			wantOutcome(t, res, err, idem.Claimed)
			for _, v := range c.refused {
				ctx := idem.WithShard(context.Background(), v)
				ended := s.begin(t, nil)
				if err := ended.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				if res, err := s.drv.Do(ctx, e.store, ended, "k", hashA, answer("refused", &ran)); !errors.Is(err, idem.ErrInvalidArgument) {
					t.Errorf("Do with shard value %#v: %v %v, want ErrInvalidArgument before any statement", v, res.Outcome, err)
				}
				if res, err := s.drv.DoTx(ctx, e.store, nil, "k", hashA, answer("refused", &ran)); !errors.Is(err, idem.ErrInvalidArgument) {
					t.Errorf("DoTx with shard value %#v: %v %v, want ErrInvalidArgument", v, res.Outcome, err)
				}
				if res, err := e.store.Lookup(ctx, s.db, "k"); !errors.Is(err, idem.ErrInvalidArgument) {
					t.Errorf("Lookup with shard value %#v: %v %v, want ErrInvalidArgument", v, res.Outcome, err)
				}
				if hasRun(s) {
					charge := idem.Call("charge", func(context.Context, string) error { ran++; return nil })
					if res, err := s.drv.Run(ctx, e.store, "k", hashA, charge, s.drv.Final("confirm", answer("refused", &ran))); !errors.Is(err, idem.ErrInvalidArgument) {
						t.Errorf("Run with shard value %#v: %v %v, want ErrInvalidArgument", v, res.Outcome, err)
					}
				}
			}
			if ran != 1 {
				t.Errorf("the Func and the steps ran %d times, want once, for the one value the column holds", ran)
			}
		})
	}
}

// testShardValueExact claims one key under every value of each kind's
// list, each a record of its own with a response of its own, then replays
// each value's own response byte for byte: a column that folded case or
// accents, padded, cut, rounded or converted a value would answer one
// value's request with another's. A UUID given in upper case, or as 16
// bytes, names the record of its lower-case form.
func testShardValueExact(t *testing.T, s *suite) {
	for _, c := range kindCases {
		t.Run(c.kind.String(), func(t *testing.T) {
			e := s.kindStore(t, c.kind)
			ran := 0
			for i, v := range c.distinct {
				res, err := s.doWith(idem.WithShard(context.Background(), v), t, e.store, "k", hashA, answer(shardName(i), &ran), true)
				if wantOutcome(t, res, err, idem.Claimed); err == nil && string(res.Response.Body) != shardName(i) {
					t.Errorf("shard value %#v: answered %q, want its own %q", v, res.Response.Body, shardName(i))
				}
			}
			for i, v := range c.distinct {
				ctx := idem.WithShard(context.Background(), v)
				res, err := s.doWith(ctx, t, e.store, "k", hashA, mustNotRun(t), true)
				wantOutcome(t, res, err, idem.Replay)
				if got := string(res.Response.Body); err == nil && got != shardName(i) {
					t.Errorf("shard value %#v replayed %q, want its own %q", v, got, shardName(i))
				}
				looked, err := e.store.Lookup(ctx, s.db, "k")
				if wantOutcome(t, looked, err, idem.Replay); err == nil && string(looked.Response.Body) != shardName(i) {
					t.Errorf("Lookup of shard value %#v: %q, want %q", v, looked.Response.Body, shardName(i))
				}
			}
			if ran != len(c.distinct) {
				t.Errorf("the Func ran %d times for %d values", ran, len(c.distinct))
			}
			if c.kind.Type == dialect.ShardUUID {
				upper := strings.ToUpper(c.distinct[0].(string))
				res, err := s.doWith(idem.WithShard(context.Background(), upper), t, e.store, "k", hashA, mustNotRun(t), true)
				if wantOutcome(t, res, err, idem.Replay); err == nil && string(res.Response.Body) != shardName(0) {
					t.Errorf("%s replayed %q, want %q, the record of its lower-case form", upper, res.Response.Body, shardName(0))
				}
				raw := [16]byte{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
				res, err = s.doWith(idem.WithShard(context.Background(), raw), t, e.store, "k", hashA, mustNotRun(t), true)
				if wantOutcome(t, res, err, idem.Replay); err == nil && string(res.Response.Body) != shardName(0) {
					t.Errorf("%x replayed %q, want %q", raw, res.Response.Body, shardName(0))
				}
			}
		})
	}
}

// shardName is the response body of the i-th value of a kind's list.
func shardName(i int) string { return "value " + string(rune('a'+i)) }

// testShardValueOwnLock holds one shard value's claim of a key in an open
// transaction, and claims the same key under another shard value in
// another: the second is a record of its own, and is Claimed without
// waiting for the first, whose lock, where the dialect takes locks of its
// own, is the pair's and not the key's. Both commit and replay their own.
// A database that runs one writer at a time (OneWriter) skips it: there
// the second transaction waits for the first to end, whatever it claims.
func testShardValueOwnLock(t *testing.T, s *suite) {
	if s.caps.OneWriter {
		t.Skip("the database runs one writing transaction at a time: a second claim waits for the first transaction, whatever its shard value")
	}
	for _, c := range kindCases {
		t.Run(c.kind.String(), func(t *testing.T) {
			e := s.kindStore(t, c.kind, idem.WithLockTimeout(2*time.Second))
			first, second := idem.WithShard(context.Background(), c.distinct[0]), idem.WithShard(context.Background(), c.distinct[1])
			ran := 0
			holder := s.begin(t, nil)
			res, err := s.drv.Do(first, e.store, holder, "k", hashA, answer("first", &ran))
			wantOutcome(t, res, err, idem.Claimed)
			other := s.begin(t, nil)
			res, err = s.drv.Do(second, e.store, other, "k", hashA, answer("second", &ran))
			wantOutcome(t, res, err, idem.Claimed)
			for _, tx := range []Tx{other, holder} {
				if err := tx.Commit(context.Background()); err != nil {
					t.Fatalf("commit: %v", err)
				}
			}
			for ctx, want := range map[context.Context]string{first: "first", second: "second"} {
				res, err := s.doWith(ctx, t, e.store, "k", hashA, mustNotRun(t), true)
				if wantOutcome(t, res, err, idem.Replay); err == nil && string(res.Response.Body) != want {
					t.Errorf("replayed %q, want %q", res.Response.Body, want)
				}
			}
		})
	}
}

// testShardColumnMissing gives a Store with a shard column a table made
// without one, and one whose shard_key is of another kind's type: Migrate
// refuses both with ErrInvalidArgument, naming the steps that convert the
// table (docs/operations.md, "Moving a table to a shard column"), and a
// call on the first, where no Migrate ran, fails without running its Func
// or asking for a retry, with an error that names Migrate or those steps,
// never a bare "unknown column".
func testShardColumnMissing(t *testing.T, s *suite) {
	if _, ok := s.d.(dialect.ShardColumn); !ok {
		t.Skip("the dialect does not implement dialect.ShardColumn")
	}
	const steps = "Moving a table to a shard column"
	plain := s.env(t)
	store, err := idem.New(s.d, idem.WithTable(plain.table), idem.WithShardColumn(idem.ShardInt64()))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	ctx := idem.WithShard(context.Background(), int64(7))
	_, err = s.doWith(ctx, t, store, "k", hashA, answer("unsharded", &ran), true)
	if err == nil || errors.Is(err, idem.ErrRetry) || ran != 0 ||
		(!strings.Contains(err.Error(), steps) && !strings.Contains(err.Error(), "Migrate")) {
		t.Errorf("Do on a table without shard_key: %v (the Func ran %d times), want an error naming Migrate or %q, and no run", err, ran, steps)
	}
	if err := store.Migrate(context.Background(), s.db); !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), steps) {
		t.Errorf("Migrate of a table without shard_key: %v, want ErrInvalidArgument naming %q", err, steps)
	}

	text := s.kindStore(t, idem.ShardText(16))
	other, err := idem.New(s.d, idem.WithTable(text.table), idem.WithShardColumn(idem.ShardInt64()))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Migrate(context.Background(), s.db); !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), steps) {
		t.Errorf("Migrate with an int64 shard column of a table whose shard_key holds text: %v, want ErrInvalidArgument naming %q", err, steps)
	}
}

// testShardValueListed leaves a multi-step request unfinished under every
// value of each kind's list: Unfinished gives each back as the Store binds
// it (ShardKind.Value), whatever the driver read. Then it stores a
// finished request under every value, and a Store a day ahead purges
// those, each by its pair, so that the purge's own derivation of a
// record's lock, where the dialect's purge takes the claims' locks, meets
// every kind's values; the unfinished requests, which do not expire, stay.
func testShardValueListed(t *testing.T, s *suite) {
	skipWithoutRun(t, s)
	if _, ok := s.d.(dialect.ShardTargeter); !ok {
		skipIfShardedByKey(t, s, "Purge locks the expired records of every shard in one transaction, unless the dialect is a dialect.ShardTargeter")
	}
	down := errors.New("the provider is down")
	for _, c := range kindCases {
		t.Run(c.kind.String(), func(t *testing.T) {
			e := s.kindStore(t, c.kind, idem.WithRetention(time.Hour))
			ctx := context.Background()
			want := map[string]bool{}
			for _, v := range c.distinct {
				_, err := s.drv.Run(idem.WithShard(ctx, v), e.store, "k", hashA,
					idem.Call("charge", func(context.Context, string) error { return down }),
					s.drv.Final("confirm", func(context.Context, Tx) (idem.Response, error) { return created, nil }))
				if !errors.Is(err, down) {
					t.Fatalf("Run under %#v with a failing call: %v, want its error", v, err)
				}
				bound, err := c.kind.Value(v)
				if err != nil {
					t.Fatal(err)
				}
				want[shardText(bound)] = true
			}
			list, err := e.store.Unfinished(ctx, s.db, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, u := range list {
				if _, err := c.kind.Value(u.Shard); err != nil {
					t.Errorf("Unfinished gives shard value %#v of Go type %T: %v", u.Shard, u.Shard, err)
				}
				got[shardText(u.Shard)] = true
			}
			if len(list) != len(c.distinct) || len(got) != len(want) {
				t.Errorf("Unfinished lists %d requests of %d shard values, want %d of %d", len(list), len(got), len(c.distinct), len(want))
			}
			for v := range want {
				if !got[v] {
					t.Errorf("Unfinished lacks shard value %s", v)
				}
			}
			for _, v := range c.distinct {
				res, err := s.drv.DoTx(idem.WithShard(ctx, v), e.store, nil, "d", hashA, answer("done", new(int)))
				wantOutcome(t, res, err, idem.Claimed)
			}
			ahead, err := idem.New(s.d, idem.WithTable(e.table), idem.WithShardColumn(c.kind), idem.WithRetention(time.Hour),
				idem.WithClock(func() time.Time { return time.Now().Add(24 * time.Hour) }))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := ahead.Purge(ctx, s.db, 3); err != nil || n != int64(len(c.distinct)) {
				t.Errorf("Purge a day ahead = %d, %v, want the %d records", n, err, len(c.distinct))
			}
		})
	}
}

// shardText writes a shard value with its Go type, so that a value read
// back as another type than the Store binds shows.
func shardText(v any) string { return fmt.Sprintf("%T %#v", v, v) }
