package idem_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
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

// forEachIdentityTarget runs f on every target of multi-step requests,
// then behind PgBouncer and on Vitess's sharded keyspace, or shows them
// skipped.
func forEachIdentityTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	dbtest.ForEachRunTarget(t, f)
	for _, tg := range dbtest.PgBouncerTargets() {
		t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
	}
	dbtest.SkipMissingPgBouncer(t)
	dbtest.ForEachVitess(t, f)
}

// seen keeps the Identity that each piece of a request's work found in
// its context, by the piece's name.
type seen struct {
	t   *testing.T
	mu  sync.Mutex
	ids map[string]idem.Identity
}

func newSeen(t *testing.T) *seen { return &seen{t: t, ids: map[string]idem.Identity{}} }

// note keeps the Identity of ctx as who's.
func (s *seen) note(ctx context.Context, who string) {
	id, ok := idem.IdentityFrom(ctx)
	if !ok {
		s.t.Errorf("%s: no Identity in its context", who)
	}
	if printed := fmt.Sprint(ctx); ok && strings.Contains(printed, id.Key) {
		s.t.Errorf("%s: its context, printed, shows the stored key: %s", who, printed)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[who] = id
}

// want checks that each of who saw the identity of want's key, scope and
// shard value.
func (s *seen) want(want idem.Identity, who ...string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range who {
		got, ok := s.ids[w]
		switch {
		case !ok:
			s.t.Errorf("%s did not run", w)
		case got.Key != want.Key || got.Scope != want.Scope || !reflect.DeepEqual(got.Shard, want.Shard):
			s.t.Errorf("%s saw key %q, scope %q, shard %#v; want %q, %q, %#v", w, got.Key, got.Scope, got.Shard, want.Key, want.Scope, want.Shard)
		}
	}
}

// oneRecord checks that each of who saw one incarnation: they served one
// record.
func (s *seen) oneRecord(who ...string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range who[1:] {
		if got, first := s.ids[w].Incarnation, s.ids[who[0]].Incarnation; got != first {
			s.t.Errorf("%s saw incarnation %d, %s %d: one record has one", w, got, who[0], first)
		}
	}
}

// TestIdentityInWork shows that the Func of Do and DoTx, and each Phase,
// Call and Final of Run, find their request's Identity in their context:
// the stored key, the scope that the caller's context names (WithScope),
// and the shard value, on every database, with and without a shard column.
// A retry that resumes the request sees the caller's scope; Resume, which
// has none, and its Compensate see an empty scope and the shard value as
// the driver scanned it (Unfinished.Shard). The context, printed, shows
// no stored key.
func TestIdentityInWork(t *testing.T) {
	forEachIdentityTarget(t, func(t *testing.T, tg target) {
		for _, sharded := range []bool{false, true} {
			name := "plain"
			if sharded {
				name = "shard column"
			}
			t.Run(name, func(t *testing.T) { identityInWork(t, tg, sharded) })
		}
	})
}

func identityInWork(t *testing.T, tg target, sharded bool) {
	var (
		c     dbtest.Clock
		e     *dbtest.Env
		shard any
		bg    = context.Background()
		opts  = []idem.Option{idem.WithClock(c.Now)}
	)
	tg = c.Leases(tg)
	if sharded {
		e, _ = tg.SetupByCustomer(t, opts...)
		shard, bg = int64(7), idem.WithShard(bg, int64(7))
	} else {
		e = tg.Setup(t, opts...)
	}
	scoped := idem.WithScope(bg, "client-a")
	s := newSeen(t)
	fn := func(who string) idem.Func {
		return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			s.note(ctx, who)
			return dbtest.Created, nil
		}
	}

	tx := e.Begin(t, nil)
	res, err := e.Store.Do(scoped, tx, "do-1", dbtest.HashA, fn("Do"))
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	res, err = e.Store.DoTx(scoped, e.DB, nil, "dotx-1", dbtest.HashA, fn("DoTx"))
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	res, err = e.Store.DoTx(bg, e.DB, nil, "dotx-2", dbtest.HashA, fn("DoTx unscoped"))
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	s.want(idem.Identity{Key: "do-1", Scope: "client-a", Shard: shard}, "Do")
	s.want(idem.Identity{Key: "dotx-1", Scope: "client-a", Shard: shard}, "DoTx")
	s.want(idem.Identity{Key: "dotx-2", Shard: shard}, "DoTx unscoped")

	// steps are a request's steps, each noting what it saw under its name
	// and the prefix; the provider is down for providerDown.
	down := errors.New("provider unreachable")
	steps := func(prefix string, providerDown bool) []idem.Step {
		return []idem.Step{
			idem.Phase("order", func(ctx context.Context, _ *sql.Tx) error { s.note(ctx, prefix+"order"); return nil }),
			idem.Call("charge", func(ctx context.Context, _ string) error {
				s.note(ctx, prefix+"charge")
				if providerDown {
					return down
				}
				return nil
			}),
			idem.Phase("charged", func(ctx context.Context, _ *sql.Tx) error { s.note(ctx, prefix+"charged"); return nil }),
			idem.Final("confirm", func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
				s.note(ctx, prefix+"confirm")
				return dbtest.Created, nil
			}),
		}
	}
	// A request that a retry of its client resumes.
	if _, err := e.Store.Run(scoped, e.DB, nil, "run-1", dbtest.HashA, steps("", true)...); !errors.Is(err, down) {
		t.Fatalf("Run: %v, want the provider's error", err)
	}
	s.want(idem.Identity{Key: "run-1", Scope: "client-a", Shard: shard}, "order", "charge")
	res, err = e.Store.Run(scoped, e.DB, nil, "run-1", dbtest.HashA, steps("retry ", false)...)
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	s.want(idem.Identity{Key: "run-1", Scope: "client-a", Shard: shard}, "retry charge", "retry charged", "retry confirm")
	s.oneRecord("order", "charge", "retry charge", "retry charged", "retry confirm")

	// A request that Resume finishes, and one that it compensates.
	for _, key := range []string{"run-2", "run-3"} {
		if _, err := e.Store.Run(scoped, e.DB, nil, key, dbtest.HashA, steps(key+" ", true)...); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}
	}
	list, err := e.Store.Unfinished(bg, e.DB, 0, 10)
	if err != nil || len(list) != 2 {
		t.Fatalf("Unfinished: %+v, %v; want run-2 and run-3", list, err)
	}
	c.Advance(time.Hour)
	compensate := idem.Compensate(time.Hour, func(ctx context.Context, _ *sql.Tx, _ idem.Unfinished, _ error) (idem.Response, error) {
		s.note(ctx, "compensate")
		return idem.Response{Status: http.StatusBadGateway}, nil
	})
	rep, err := e.Store.Resume(context.Background(), e.DB, nil, func(_ context.Context, key string) ([]idem.Step, error) {
		return steps("resume "+key+" ", key == "run-3"), nil
	}, compensate)
	if err != nil || rep != (idem.ResumeReport{Finished: 1, Compensated: 1}) {
		t.Fatalf("Resume: %+v, %v; want one finished and one compensated", rep, err)
	}
	for _, u := range list {
		if !reflect.DeepEqual(u.Shard, list[0].Shard) || (shard == nil) != (u.Shard == nil) {
			t.Fatalf("Unfinished lists shard values %#v and %#v, want one of customer 7's", list[0].Shard, u.Shard)
		}
	}
	for _, key := range []string{"run-2", "run-3"} {
		s.want(idem.Identity{Key: key, Scope: "client-a", Shard: shard}, key+" order", key+" charge")
	}
	resumed := idem.Identity{Key: "run-2", Shard: list[0].Shard}
	s.want(resumed, "resume run-2 charge", "resume run-2 charged", "resume run-2 confirm")
	s.oneRecord("run-2 order", "run-2 charge", "resume run-2 charge", "resume run-2 charged", "resume run-2 confirm")
	resumed.Key = "run-3"
	s.want(resumed, "resume run-3 charge", "compensate")
	s.oneRecord("run-3 order", "run-3 charge", "resume run-3 charge", "compensate")
}
