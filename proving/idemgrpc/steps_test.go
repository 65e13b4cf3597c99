package idemgrpc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// The item that makes Checkout's provider decline the card.
const declinedItem = "declined"

// checkout serves Checkout: a call without an item is refused before any
// step runs, with InvalidArgument, which is stored nowhere; the declined
// item ends the call after the order phase with a stored
// FailedPrecondition; any other item runs the checkout's steps, whose
// final reply carries the charge and the item, unless the shop's steps
// replace them.
func (s *shop) checkout(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	item := req.GetFields()[fieldItem].GetStringValue()
	if item == "" {
		return nil, status.Error(codes.InvalidArgument, "an order needs an item")
	}
	key := metadata.ValueFromIncomingContext(ctx, idemgrpc.DefaultKeyMetadata)[0]
	reply := func(ctx context.Context, id string) (idem.Response, error) {
		return idemgrpc.Reply(ctx, &structpb.Struct{Fields: map[string]*structpb.Value{
			"charge": structpb.NewStringValue(id),
			"item":   structpb.NewStringValue(item),
		}})
	}
	var steps []idem.Step
	if s.e.via == checkout.ViaPgxPool {
		// The phases take the pgx.Tx of idempgx.Runner.
		steps = checkout.Checkout[pgx.Tx]{Ops: checkout.PgxOps, Effects: s.e.Effects, URL: s.provider, Key: key,
			Stored: idemgrpc.StoredKey("", key), Die: s.die, Answer: reply}.Steps()
	} else {
		steps = checkout.Checkout[*sql.Tx]{Ops: checkout.SQLOps, Effects: s.e.Effects, URL: s.provider, Key: key,
			Stored: idemgrpc.StoredKey("", key), Die: s.die, Answer: reply}.Steps()
	}
	if s.steps != nil {
		steps = s.steps(item)
	}
	if item == declinedItem {
		steps[1] = idem.Call("charge", func(ctx context.Context, _ string) error {
			resp, err := idemgrpc.StoredError(ctx, status.Error(codes.FailedPrecondition, "card declined"))
			if err != nil {
				return err
			}
			return idem.Finish(resp)
		})
	}
	return idemgrpc.Run[*structpb.Struct](ctx, steps...)
}

// startCheckout serves a shop whose Checkout calls the provider at url,
// with the interceptor on store, a store of e's table, and e's database,
// as e.via says, and returns a client connection.
func startCheckout(t *testing.T, e *env, store *idem.Store, url string, die func(string)) *grpc.ClientConn {
	t.Helper()
	ic, err := e.interceptor(store, protected, idemgrpc.WithStepMethods(checkoutMethod), idemgrpc.WithSingleClient())
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, &shop{e: e, provider: url, die: die}, ic)
}

// order calls Checkout for item under key (none when empty).
func order(conn *grpc.ClientConn, key, item string) answer {
	req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue(item)}}
	var md []string
	if key != "" {
		md = []string{idemgrpc.DefaultKeyMetadata, key}
	}
	return call(conn, checkoutMethod, req, new(structpb.Struct), md...)
}

// pushback is the retry delay that a carries, checked to be more than min
// and at most lease.
func pushback(a answer, min, lease time.Duration) (time.Duration, error) {
	got := a.trailer.Get("grpc-retry-pushback-ms")
	var ms int
	var err error
	if len(got) == 1 {
		ms, err = strconv.Atoi(got[0])
	}
	d := time.Duration(ms) * time.Millisecond
	if len(got) != 1 || err != nil || d <= min || d > lease {
		return 0, fmt.Errorf("%v with pushback %q, want more than %v and at most %v", a.err, got, min, lease)
	}
	return d, nil
}

// orderUntilDone is a client that calls Checkout until it gets a final
// answer: on Unavailable it waits as long as the pushback says, which must
// be at most the lease.
func orderUntilDone(conn *grpc.ClientConn, key, item string, lease time.Duration) (answer, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		a := order(conn, key, item)
		if status.Code(a.err) != codes.Unavailable {
			return a, nil
		}
		wait, err := pushback(a, 0, lease)
		if err != nil {
			return a, err
		}
		time.Sleep(wait)
	}
	return answer{}, fmt.Errorf("%s: no final answer within a minute", key)
}

// chargeOf returns the charge of a Checkout reply.
func chargeOf(a answer) string {
	return a.reply.(*structpb.Struct).GetFields()["charge"].GetStringValue()
}

// TestRunSteps serves Checkout, a multi-step call that charges a card at a
// provider on loopback, through Run on every database: the first call runs
// it and gets the final reply, a retry gets it again in the same encoding,
// marked as a replay, with no second call; another item under the key is
// refused with KEY_REUSED; a call that the handler refuses before Run
// stores nothing; a declined card is a stored error, replayed; and
// duplicates of a call that is running get Unavailable IN_FLIGHT, one
// alone with the lease that is left as its pushback, then the one reply.
func TestRunSteps(t *testing.T) {
	forEachRunTargetWay(t, func(t *testing.T, tg target, via string) {
		e := setupVia(t, tg, via)
		p := checkout.NewProvider(t)
		conn := startCheckout(t, e, e.Store, p.URL(), nil)

		first := order(conn, "k1", "book")
		if first.err != nil || !strings.HasPrefix(chargeOf(first), "ch_") || first.reply.(*structpb.Struct).GetFields()["item"].GetStringValue() != "book" {
			t.Fatalf("first call: %v %v, want the charge and the item", first.reply, first.err)
		}
		if got := first.header.Get(idemgrpc.ReplayedMetadata); len(got) != 0 {
			t.Errorf("the first call is marked as a replay: %q", got)
		}
		wantReplay(t, order(conn, "k1", "book"), first)
		if calls, charges := p.Counts("k1"); calls != 1 || charges != 1 {
			t.Errorf("k1: %d calls and %d charges, want 1 and 1", calls, charges)
		}
		checkout.Effects(t, e.Effects, idemgrpc.StoredKey("", "k1"), chargeOf(first))

		wantRefusal(t, order(conn, "k1", "lamp"), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
		if a := order(conn, "k2", ""); status.Code(a.err) != codes.InvalidArgument || status.Convert(a.err).Message() != "an order needs an item" {
			t.Errorf("refused call: %v, want the handler's InvalidArgument", a.err)
		}
		e.wantNoRecord(t, "", "k2")
		wantRefusal(t, order(conn, "", "lamp"), codes.InvalidArgument, idemgrpc.ReasonKeyRequired)

		declined := order(conn, "k4", declinedItem)
		if st := status.Convert(declined.err); st.Code() != codes.FailedPrecondition || st.Message() != "card declined" {
			t.Errorf("declined: %v, want the stored FailedPrecondition", declined.err)
		}
		again := order(conn, "k4", declinedItem)
		if st := status.Convert(again.err); st.Code() != codes.FailedPrecondition || st.Message() != "card declined" {
			t.Errorf("declined, again: %v, want the stored FailedPrecondition", again.err)
		}
		if got := again.header.Get(idemgrpc.ReplayedMetadata); len(got) != 1 {
			t.Errorf("the retry of a declined call is not marked as a replay: %v", again.header)
		}

		entered, release := p.Hold()
		defer release()
		firstDone := make(chan answer, 1)
		go func() { firstDone <- order(conn, "k3", "pen") }()
		<-entered // the first call is in its call to the provider, which holds the lease
		const duplicates = 4
		var wg sync.WaitGroup
		for range duplicates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := order(conn, "k3", "pen")
				wantRefusal(t, a, codes.Unavailable, idemgrpc.ReasonInFlight)
				if _, err := pushback(a, idemgrpc.DefaultRetryPushback-time.Millisecond, idem.DefaultLease); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		// Duplicates that meet at the claim may find each other there and
		// answer without reading the lease; one alone reads it, and asks
		// for more than the default pushback, the lease that is left.
		alone := order(conn, "k3", "pen")
		wantRefusal(t, alone, codes.Unavailable, idemgrpc.ReasonInFlight)
		if _, err := pushback(alone, idemgrpc.DefaultRetryPushback, idem.DefaultLease); err != nil {
			t.Error(err)
		}
		release()
		fresh := <-firstDone
		if fresh.err != nil {
			t.Fatal(fresh.err)
		}
		for range duplicates {
			a, err := orderUntilDone(conn, "k3", "pen", idem.DefaultLease)
			if err != nil {
				t.Fatal(err)
			}
			wantReplay(t, a, fresh)
		}
		if calls, charges := p.Counts("k3"); calls != 1 || charges != 1 {
			t.Errorf("k3: %d calls and %d charges, want 1 and 1", calls, charges)
		}
	})
}

// stepsChildEnv is set in the service process of TestRunResumeAfterKill.
const stepsChildEnv = "IDEMGRPC_STEPS_CHILD"

// stepsLease is the lease of TestRunResumeAfterKill's services: a client's
// retry waits out the killed one's.
const stepsLease = 2 * time.Second

// TestRunResumeAfterKill serves Checkout from a service process, which a
// client's call makes call the provider, and kills the service with
// SIGKILL after that call, before the next phase. Then the service is
// started again, and three clients retry the call at once, each waiting
// as the pushback of an Unavailable says, which must be within the lease:
// one of them resumes the checkout once the dead service's lease has run
// out, and all get its one reply; the provider made one charge, under the
// one call key that the killed service sent too, and each phase wrote its
// effect once. The targets run in parallel, since each waits out leases.
func TestRunResumeAfterKill(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		t.Parallel()
		e := setup(t, tg, idem.WithLease(stepsLease))
		p := checkout.NewProvider(t)
		const key = "checkout-killed"
		lost := make(chan error, 1)
		cmd := dbtest.StartChild(t, "TestRunStepsChild", checkout.AfterCall, func(line string) {
			if addr, ok := strings.CutPrefix(line, "serving "); ok {
				go func() {
					conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
					if err != nil {
						lost <- err
						return
					}
					defer conn.Close()
					lost <- order(conn, key, "book").err
				}()
			}
		},
			append(e.ChildEnv(tg.Driver), stepsChildEnv+"=1", "IDEMGRPC_PROVIDER="+p.URL())...)
		dbtest.Kill(t, cmd)
		if err := <-lost; status.Code(err) != codes.Unavailable {
			t.Fatalf("the call to the killed service: %v, want Unavailable from the lost connection", err)
		}

		conn := startCheckout(t, e, e.Store, p.URL(), nil)
		answers := checkout.Together(t, 3, func() (answer, error) { return orderUntilDone(conn, key, "book", stepsLease) })
		var fresh []answer
		for _, a := range answers {
			if a.err != nil {
				t.Fatalf("a client got %v", a.err)
			}
			if len(a.header.Get(idemgrpc.ReplayedMetadata)) == 0 {
				fresh = append(fresh, a)
			}
		}
		if len(fresh) != 1 {
			t.Fatalf("%d clients ran the checkout, want one to resume it", len(fresh))
		}
		for _, a := range answers {
			if a.reply != fresh[0].reply {
				wantReplay(t, a, fresh[0])
			}
		}
		checkout.Effects(t, e.Effects, idemgrpc.StoredKey("", key), chargeOf(fresh[0]))
		// The resumed call calls the provider again; a third call is the
		// takeover of a runner that a busy machine held past its lease,
		// with the same call key.
		if calls, charges := p.Counts(key); calls < 2 || charges != 1 {
			t.Errorf("%d calls and %d charges at the provider, want 2 or more and 1", calls, charges)
		}
		if keys := p.Keys(key); len(keys) != 1 {
			t.Errorf("call keys %q, want the killed service's alone", keys)
		}
	})
}

// TestRunStepsChild is the service process of TestRunResumeAfterKill; it
// does nothing in a normal run.
func TestRunStepsChild(t *testing.T) {
	if os.Getenv(stepsChildEnv) == "" {
		t.Skip("the service process of TestRunResumeAfterKill")
	}
	e := &env{Env: dbtest.OpenChild(t, idem.WithLease(stepsLease))}
	ic, err := idemgrpc.UnaryServerInterceptor(e.Store, e.DB, nil, idemgrpc.WithStepMethods(checkoutMethod), idemgrpc.WithSingleClient())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, &shop{e: e, provider: os.Getenv("IDEMGRPC_PROVIDER"), die: dbtest.DieAt(checkout.AfterCall)}, ic)
	fmt.Println("serving " + addr)
	select {} // until the parent's SIGKILL
}

// TestRunOutsideAStepMethod calls Run, Reply and StoredError where no call
// of a method of WithStepMethods is: each refuses, and runs nothing.
func TestRunOutsideAStepMethod(t *testing.T) {
	ran := false
	steps := []idem.Step{idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) {
		ran = true
		return idem.Response{}, nil
	})}
	if _, err := idemgrpc.Run[*structpb.Struct](context.Background(), steps...); status.Code(err) != codes.Internal || ran {
		t.Errorf("Run outside a call: %v, ran %v; want Internal, and nothing run", err, ran)
	}
	if _, err := idemgrpc.Reply(context.Background(), &structpb.Struct{}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Reply outside a call: %v, want ErrInvalidArgument", err)
	}
	if _, err := idemgrpc.StoredError(context.Background(), status.Error(codes.NotFound, "gone")); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("StoredError outside a call: %v, want ErrInvalidArgument", err)
	}
}

// TestRunFailures shows what Run answers for each error of Store.Run, from
// steps that return it, on every database: the code, the reason, the
// pushback of those that ask for a retry, and the error hook told of each.
// A charge that fails is UNFINISHED, and its retry resumes the call; Run
// called twice in one call is INTERNAL.
func TestRunFailures(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		p := checkout.NewProvider(t)
		h := &hook{}
		ic, err := idemgrpc.UnaryServerInterceptor(e.Store, e.DB, nil, idemgrpc.WithStepMethods(checkoutMethod), idemgrpc.WithSingleClient(), h.option())
		if err != nil {
			t.Fatal(err)
		}
		final := idem.Final("confirm", func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
			return idemgrpc.Reply(ctx, &structpb.Struct{})
		})
		failing := func(err error) []idem.Step {
			return []idem.Step{idem.Call("charge", func(context.Context, string) error { return err }), final}
		}
		cases := map[string]struct {
			steps  []idem.Step
			code   codes.Code
			reason string
			retry  bool
		}{
			"lease-lost":     {failing(idem.ErrLeaseLost), codes.Unavailable, idemgrpc.ReasonInFlight, true},
			"retry":          {failing(fmt.Errorf("busy: %w", idem.ErrRetry)), codes.Unavailable, idemgrpc.ReasonUnfinished, true},
			"commit-unknown": {failing(idem.ErrCommitUnknown), codes.Unavailable, idemgrpc.ReasonOutcomeUnknown, true},
			"too-large":      {failing(idem.ErrResponseTooLarge), codes.Internal, idemgrpc.ReasonResponseTooLarge, false},
			"damaged":        {failing(idem.ErrCorruptRecord), codes.DataLoss, idemgrpc.ReasonRecordDamaged, false},
			"invalid-steps":  {[]idem.Step{final, final}, codes.Internal, idemgrpc.ReasonInternal, false},
			"wrong-reply": {[]idem.Step{idem.Final("confirm", func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
				return idemgrpc.Reply(ctx, wrapperspb.String("not a Struct"))
			})}, codes.Unavailable, idemgrpc.ReasonUnfinished, true},
		}
		conn := serve(t, &shop{e: e, steps: func(item string) []idem.Step {
			if item == "charge-fails" {
				return checkout.Checkout[*sql.Tx]{Ops: checkout.SQLOps, Effects: e.Effects, URL: p.URL(), Key: item,
					Answer: func(ctx context.Context, id string) (idem.Response, error) {
						return idemgrpc.Reply(ctx, &structpb.Struct{Fields: map[string]*structpb.Value{"charge": structpb.NewStringValue(id)}})
					}}.Steps()
			}
			return cases[item].steps
		}}, ic)
		for name, c := range cases {
			before := len(h.reported())
			a := order(conn, name, name)
			wantRefusal(t, a, c.code, c.reason)
			if c.retry {
				if _, err := pushback(a, 0, idemgrpc.DefaultRetryPushback); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
			if got := h.reported(); len(got) != before+1 {
				t.Errorf("%s: the hook was told %v, want one error", name, got[before:])
			}
		}

		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idemgrpc.DefaultKeyMetadata, "twice"))
		_, err = ic(ctx, &structpb.Struct{}, &grpc.UnaryServerInfo{FullMethod: checkoutMethod}, func(ctx context.Context, _ any) (any, error) {
			if _, err := idemgrpc.Run[*structpb.Struct](ctx, final); err != nil {
				return nil, err
			}
			return idemgrpc.Run[*structpb.Struct](ctx, final)
		})
		if status.Code(err) != codes.Internal || !strings.Contains(fmt.Sprint(h.reported()), "twice") {
			t.Errorf("Run twice in one call: %v, hook told %v; want Internal, and the hook told why", err, h.reported())
		}

		p.FailNext(1)
		a := order(conn, "charge-fails", "charge-fails")
		wantRefusal(t, a, codes.Unavailable, idemgrpc.ReasonUnfinished)
		if a := order(conn, "charge-fails", "charge-fails"); a.err != nil || len(a.header.Get(idemgrpc.ReplayedMetadata)) != 0 {
			t.Errorf("the retry of a failed charge: %v, %v; want the reply of the resumed call", a.err, a.header)
		}
		if calls, charges := p.Counts("charge-fails"); calls != 2 || charges != 1 {
			t.Errorf("%d calls and %d charges, want 2 and 1", calls, charges)
		}
	})
}
