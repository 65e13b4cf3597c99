package idempgx_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestIdentityOnPgx shows that idempgx's Do, DoTx and Run hand their Func
// and each Phase, Call and Final the request's idem.Identity in their
// context, on PostgreSQL, behind PgBouncer and on Citus, with a shard
// column: the stored key, the scope of the caller's context and the shard
// value. Resume's steps and its Compensate see the shard value as the
// driver scanned it (Unfinished.Shard) and no scope. The Store's Events
// carry the scope of the call.
func TestIdentityOnPgx(t *testing.T) {
	for _, tg := range shardTargets() {
		t.Run(tg.target.Name, func(t *testing.T) {
			if tg.dsn == "" {
				t.Skip(tg.skip)
			}
			identityOnPgx(t, tg.target, tg.dsn)
		})
	}
}

func identityOnPgx(t *testing.T, tg dbtest.Target, dsn string) {
	var (
		mu     sync.Mutex
		ids    = map[string]idem.Identity{}
		scopes []string
	)
	note := func(ctx context.Context, who string) {
		id, ok := idem.IdentityFrom(ctx)
		if !ok {
			t.Errorf("%s: no Identity in its context", who)
		}
		mu.Lock()
		defer mu.Unlock()
		ids[who] = id
	}
	want := func(want idem.Identity, who ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, w := range who {
			if got, ok := ids[w]; !ok || got.Key != want.Key || got.Scope != want.Scope || !reflect.DeepEqual(got.Shard, want.Shard) {
				t.Errorf("%s saw %+v (ran: %v); want key %q, scope %q, shard %#v", w, got, ok, want.Key, want.Scope, want.Shard)
			}
		}
	}
	e, _ := tg.SetupByCustomer(t, idem.WithObserver(func(_ context.Context, ev idem.Event) {
		mu.Lock()
		defer mu.Unlock()
		scopes = append(scopes, ev.Scope)
	}))
	bg := context.Background()
	pool, err := pgxpool.New(bg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pg := idempgx.New(e.Store)
	customer := idem.WithShard(bg, int64(7))
	scoped := idem.WithScope(customer, "client-a")
	fn := func(who string) idempgx.Func {
		return func(ctx context.Context, _ pgx.Tx) (idem.Response, error) {
			note(ctx, who)
			return created, nil
		}
	}

	tx, err := pool.Begin(scoped)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(bg) }()
	if res, err := pg.Do(scoped, tx, "do-1", hashA, fn("Do")); err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("Do: %v, %v", res.Outcome, err)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if res, err := pg.DoTx(scoped, pool, pgx.TxOptions{}, "dotx-1", hashA, fn("DoTx")); err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("DoTx: %v, %v", res.Outcome, err)
	}
	want(idem.Identity{Key: "do-1", Scope: "client-a", Shard: int64(7)}, "Do")
	want(idem.Identity{Key: "dotx-1", Scope: "client-a", Shard: int64(7)}, "DoTx")

	down := errors.New("provider unreachable")
	steps := func(prefix string, providerDown bool) []idem.Step {
		return []idem.Step{
			idem.Phase("order", func(ctx context.Context, _ pgx.Tx) error { note(ctx, prefix+"order"); return nil }),
			idem.Call("charge", func(ctx context.Context, _ string) error {
				note(ctx, prefix+"charge")
				if providerDown {
					return down
				}
				return nil
			}),
			idem.Final("confirm", func(ctx context.Context, _ pgx.Tx) (idem.Response, error) {
				note(ctx, prefix+"confirm")
				return created, nil
			}),
		}
	}
	if res, err := pg.Run(scoped, pool, pgx.TxOptions{}, "run-1", hashA, steps("", false)...); err != nil || res.Outcome != idem.Claimed {
		t.Fatalf("Run: %v, %v", res.Outcome, err)
	}
	want(idem.Identity{Key: "run-1", Scope: "client-a", Shard: int64(7)}, "order", "charge", "confirm")
	for _, key := range []string{"run-2", "run-3"} {
		if _, err := pg.Run(scoped, pool, pgx.TxOptions{}, key, hashA, steps(key+" ", true)...); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}
	}
	list, err := pg.Unfinished(bg, pool, 0, 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("Unfinished: %+v, %v; want run-2 and run-3", list, err)
	}
	rep, err := pg.Resume(bg, pool, pgx.TxOptions{}, func(_ context.Context, key string) ([]idem.Step, error) {
		return steps("resume "+key+" ", key == "run-3"), nil
	}, idem.ResumeOlderThan(0), idem.Compensate(time.Nanosecond, func(ctx context.Context, _ pgx.Tx, _ idem.Unfinished, _ error) (idem.Response, error) {
		note(ctx, "compensate")
		return idem.Response{Status: 502}, nil
	}))
	if err != nil || rep != (idem.ResumeReport{Finished: 1, Compensated: 1}) {
		t.Fatalf("Resume: %+v, %v; want one finished and one compensated", rep, err)
	}
	want(idem.Identity{Key: "run-2", Shard: list[0].Shard}, "resume run-2 charge", "resume run-2 confirm")
	want(idem.Identity{Key: "run-3", Shard: list[0].Shard}, "resume run-3 charge", "compensate")

	mu.Lock()
	defer mu.Unlock()
	wantScopes := []string{"client-a", "client-a", "client-a", "client-a", "client-a", "", "", "", "", "", ""}
	if !reflect.DeepEqual(scopes, wantScopes) {
		t.Errorf("the events' scopes are %q, want %q: the calls' five, and none for Resume's", scopes, wantScopes)
	}
}
