package checkout

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// The cases of call keys, which hold whichever way a request reaches
// Store.Run: the call key of a Call step names one record of a key, so that
// the provider answers a call again only for a retry of the same request.

// Client orders the checkout of key as a client would, through one way of
// serving it, and returns the charge that the final answer carries, or an
// error for any other answer.
type Client func(key string) (chargeID string, err error)

// Service is the checkout served one way (Store.Run on database/sql or on
// a pgx pool, idemhttp's Steps, idemgrpc's Run), for the cases of call
// keys.
type Service struct {
	Env      *dbtest.Env // the Store's table, and the effects of the checkout
	Provider *Provider
	// Stored returns the key as the Store keeps it, for the key a
	// client sends: the checkout names its effect rows by it (see
	// Checkout.Stored), and the operators' calls take it.
	Stored func(key string) string
	// Serve serves the checkout through store, a Store on Env's table,
	// calling Provider, and returns a client of it.
	Serve func(t *testing.T, store *idem.Store) Client
}

// NewRecordCallKeys orders one key again after each end of its record: a
// request after ReleaseUndone (an operator refunded the charge of a
// request that its runner left unfinished, and released it), after Forget
// and after its record expired and was taken over is a new request, which
// the provider charges anew under a call key that no earlier request of
// the key sent.
func NewRecordCallKeys(t *testing.T, s Service) {
	t.Helper()
	ctx := context.Background()
	const key = "checkout-again"
	stored := s.Stored(key)
	store := s.Env.Store
	order := s.Serve(t, store)
	made := 0 // the charges the provider made for key
	var answered []string
	want := func(what string) {
		t.Helper()
		if _, charges := s.Provider.Counts(key); charges != made || len(s.Provider.Keys(key)) != made {
			t.Fatalf("%s: %d charges under call keys %q; want %d charges, each under a call key of its own", what, charges, s.Provider.Keys(key), made)
		}
	}
	anew := func(what string, order Client) {
		t.Helper()
		id, err := order(key)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		made++
		want(what)
		if slices.Contains(answered, id) {
			t.Errorf("%s: answered with %s, a charge of an earlier request (%q)", what, id, answered)
		}
		answered = append(answered, id)
		Effects(t, s.Env.Effects, stored, id)
		// The next request's final phase reads its own charge back.
		s.Env.Effects.Delete(t, stored)
	}

	s.Provider.LoseAnswers(1)
	if _, err := order(key); err == nil {
		t.Fatal("a request whose charge's answer was lost was answered")
	}
	made++
	want("the request whose charge's answer was lost")
	if err := store.ReleaseUndone(ctx, s.Env.DB, stored); err != nil {
		t.Fatalf("ReleaseUndone: %v", err)
	}
	s.Env.Effects.Delete(t, stored) // undone, as ReleaseUndone says
	anew("the request after ReleaseUndone", order)

	if err := store.Forget(ctx, s.Env.DB, stored); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	anew("the request after Forget", order)

	later, err := idem.New(s.Env.Dialect, idem.WithTable(s.Env.Table),
		idem.WithClock(func() time.Time { return time.Now().Add(idem.DefaultRetention + time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	anew("the request that took the expired record over", s.Serve(t, later))
}

// CallKeyWithoutIncarnation resumes a request whose record has no
// incarnation, as one created before the table had the column holds
// (dbtest.Env.ClearIncarnation), and whose runner charged before the
// upgrade with the call key of then, idem.CallKey(stored key, step): the
// resumed request sends that key again, and the provider answers it with
// the charge it made.
func CallKeyWithoutIncarnation(t *testing.T, s Service) {
	t.Helper()
	const key = "checkout-upgraded"
	stored := s.Stored(key)
	order := s.Serve(t, s.Env.Store)
	s.Provider.FailNext(1)
	if _, err := order(key); err == nil {
		t.Fatal("a request whose charge failed was answered")
	}
	s.Env.ClearIncarnation(t, stored)
	old := idem.CallKey(stored, "charge")
	before, err := Charge(context.Background(), s.Provider.URL(), key, old)
	if err != nil {
		t.Fatal(err)
	}
	id, err := order(key)
	if err != nil {
		t.Fatalf("the resumed request: %v", err)
	}
	if keys := s.Provider.Keys(key); id != before || len(keys) != 1 || keys[0] != old {
		t.Errorf("the resumed request answered %s under call keys %q; want the charge %s of the call key %q", id, keys, before, old)
	}
	if _, charges := s.Provider.Counts(key); charges != 1 {
		t.Errorf("%d charges, want 1", charges)
	}
	Effects(t, s.Env.Effects, stored, id)
}

// CustomerOrder names the order of customer with key at the provider.
func CustomerOrder(customer int64, key string) string {
	return fmt.Sprintf("%s of customer %d", key, customer)
}

// CustomerCallKeys orders with one key for two customers, on a Store with
// a shard column: each customer is charged once, under a call key of its
// own, and each one's retry is answered with its own charge. order orders
// customer's checkout with key, as a Client does.
func CustomerCallKeys(t *testing.T, p *Provider, order func(customer int64, key string) (chargeID string, err error)) {
	t.Helper()
	const key = "checkout-shared"
	customers := []int64{7, 8}
	charged := map[int64]string{}
	var keys []string
	for _, c := range customers {
		id, err := order(c, key)
		if err != nil {
			t.Fatalf("customer %d: %v", c, err)
		}
		charged[c] = id
		keys = append(keys, p.Keys(CustomerOrder(c, key))...)
		if _, charges := p.Counts(CustomerOrder(c, key)); charges != 1 {
			t.Errorf("customer %d: %d charges, want 1", c, charges)
		}
	}
	if len(keys) != 2 || keys[0] == keys[1] || charged[7] == charged[8] {
		t.Errorf("the customers sent call keys %q and were answered with %v; want one call key and one charge each", keys, charged)
	}
	for _, c := range customers {
		if id, err := order(c, key); err != nil || id != charged[c] {
			t.Errorf("customer %d's retry: %s, %v; want its own charge %s", c, id, err, charged[c])
		}
	}
}

// ForCustomer is the checkout of a customer on a Store with a shard
// column, whose phases write to the customer's shard alone
// (dbtest.SetupByCustomer): the order phase places the customer's order,
// the charge names the customer's order at the provider (CustomerOrder),
// and the final phase answers with the charge.
type ForCustomer[TX any] struct {
	Ops      TxOps[TX]
	Orders   *dbtest.Orders
	URL      string // the provider's
	Customer int64
	Key      string
	// Answer is as Checkout's.
	Answer func(ctx context.Context, chargeID string) (idem.Response, error)
}

// Steps returns the checkout's steps. The final phase follows the call,
// whose answer it may take from memory: a resumed request calls again
// before it.
func (c ForCustomer[TX]) Steps() []idem.Step {
	answer := orDefault(c.Answer)
	var chargeID string
	return []idem.Step{
		idem.Phase("order", func(ctx context.Context, tx TX) error {
			return c.Ops.Exec(ctx, tx, c.Orders.InsertSQL(), c.Customer, dbtest.EffectKey(c.Key))
		}),
		idem.Call("charge", func(ctx context.Context, callKey string) (err error) {
			chargeID, err = Charge(ctx, c.URL, CustomerOrder(c.Customer, c.Key), callKey)
			return err
		}),
		idem.Final("confirm", func(ctx context.Context, _ TX) (idem.Response, error) {
			return answer(ctx, chargeID)
		}),
	}
}
