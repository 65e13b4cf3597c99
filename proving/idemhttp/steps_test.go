package idemhttp_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/internal/runnerfuncs"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// buildCheckout returns the function that Steps is given: it reads the
// order's item from the JSON body, refusing a body without one with a 400
// that is not stored, and returns the checkout's steps, named by the
// request's key, whose final response is a 201 with the charge and the
// item, its Location and its Content-Type.
func buildCheckout[TX any](ops checkout.TxOps[TX], fx *dbtest.Effects, url string, die func(string)) func(*http.Request) ([]idem.Step, error) {
	return func(r *http.Request) ([]idem.Step, error) {
		var order struct{ Item string }
		if err := json.NewDecoder(r.Body).Decode(&order); err != nil || order.Item == "" {
			return nil, idem.Finish(idem.Response{Status: http.StatusBadRequest,
				Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, Body: []byte("an order needs an item\n")})
		}
		key := r.Header.Get("Idempotency-Key")
		c := checkout.Checkout[TX]{Ops: ops, Effects: fx, URL: url, Key: key, Stored: idemhttp.StoredKey("", key), Die: die,
			Answer: func(_ context.Context, id string) (idem.Response, error) {
				body, err := json.Marshal(map[string]string{"charge": id, "item": order.Item})
				h := http.Header{"Content-Type": {"application/json"}, "Location": {"/charges/" + id}}
				return idem.Response{Status: http.StatusCreated, Header: h, Body: body}, err
			}}
		return c.Steps(), nil
	}
}

// checkoutHandler is the checkout endpoint on e's store, served via
// database/sql or a pgx pool of dsn, calling the provider at url.
func checkoutHandler(t testing.TB, via string, store *idem.Store, db *sql.DB, dsn string, fx *dbtest.Effects, url string, die func(string)) http.Handler {
	t.Helper()
	if via == checkout.ViaPgxPool {
		m, err := idempgx.NewMiddleware(store, newPool(t, dsn), pgx.TxOptions{}, idemhttp.WithSingleClient())
		if err != nil {
			t.Fatal(err)
		}
		return m.Steps(buildCheckout(checkout.PgxOps, fx, url, die))
	}
	m, err := idemhttp.New(store, db, nil, idemhttp.WithSingleClient())
	if err != nil {
		t.Fatal(err)
	}
	return m.Steps(buildCheckout(checkout.SQLOps, fx, url, die))
}

// newPool returns a pgx pool of dsn, closed at the end of the test.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func (r reply) String() string { return fmt.Sprintf("%d %q", r.status, r.body) }

func replayed(r reply) bool { return r.header.Get(idemhttp.ReplayedHeader) == "true" }

// order posts an order of item to url under key (none when empty), with
// the tests' client.
func order(url, key, item string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/checkout", strings.NewReader(`{"item":"`+item+`"}`))
	if err != nil {
		return reply{}, err
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, body}, err
}

// mustOrder is order, failing the test on a transport error.
func mustOrder(t *testing.T, url, key, item string) reply {
	t.Helper()
	r, err := order(url, key, item)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// retryAfter is the delay of r's Retry-After, checked to be between 1 s
// and lease, rounded up to whole seconds as Retry-After counts them.
func retryAfter(r reply, lease time.Duration) (time.Duration, error) {
	s, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || s < 1 || time.Duration(s)*time.Second > (lease+time.Second-1).Truncate(time.Second) {
		return 0, fmt.Errorf("%v with Retry-After %q, want 1 to %v seconds", r, r.header.Get("Retry-After"), lease.Seconds())
	}
	return time.Duration(s) * time.Second, nil
}

// orderUntilDone is a client that sends the order key until it gets a
// final reply: on a 409 or a 503 it waits as long as Retry-After says,
// which must be between 1 s and the lease, rounded up.
func orderUntilDone(url, key, item string, lease time.Duration) (reply, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		r, err := order(url, key, item)
		if err != nil {
			return r, err
		}
		if r.status != http.StatusConflict && r.status != http.StatusServiceUnavailable {
			return r, nil
		}
		wait, err := retryAfter(r, lease)
		if err != nil {
			return r, err
		}
		time.Sleep(wait)
	}
	return reply{}, fmt.Errorf("%s: no final reply within a minute", key)
}

// TestSteps serves the checkout, a multi-step request that charges a card
// at a provider on loopback, through Steps on every database, via
// database/sql and, on PostgreSQL, a pgx pool: the first request runs it
// and gets the final response, a retry gets it again byte for byte,
// marked as a replay, with no second call; another body under the key
// gets a 422; a body that build refuses gets its 400, stored nowhere; a
// failed charge gets a 503 unfinished, and its retry resumes the request;
// and duplicates of a request that is running get 409 with a Retry-After
// within the lease, the lease that is left for one alone, then the one
// response.
func TestSteps(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				e := setup(t, tg)
				p := checkout.NewProvider(t)
				srv := httptest.NewServer(checkoutHandler(t, via, e.Store, e.DB, e.DSN, e.Effects, p.URL(), nil))
				defer srv.Close()

				first := mustOrder(t, srv.URL, "k1", "book")
				var body struct{ Charge, Item string }
				if err := json.Unmarshal(first.body, &body); first.status != http.StatusCreated || err != nil || body.Item != "book" || !strings.HasPrefix(body.Charge, "ch_") {
					t.Fatalf("first request: %v, want 201 with the charge and the item", first)
				}
				if replayed(first) || first.header.Get("Location") != "/charges/"+body.Charge {
					t.Errorf("first request: headers %v, want the Location of the charge and no replay marker", first.header)
				}
				again := mustOrder(t, srv.URL, "k1", "book")
				if again.status != first.status || !bytes.Equal(again.body, first.body) || !replayed(again) ||
					again.header.Get("Location") != first.header.Get("Location") || again.header.Get("Content-Type") != "application/json" {
					t.Errorf("retry: %v %v, want the first response %v byte for byte, marked as a replay", again, again.header, first)
				}
				if calls, charges := p.Counts("k1"); calls != 1 || charges != 1 {
					t.Errorf("k1: %d calls and %d charges, want 1 and 1", calls, charges)
				}
				checkout.Effects(t, e.Effects, idemhttp.StoredKey("", "k1"), body.Charge)

				if r := mustOrder(t, srv.URL, "k1", "lamp"); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "key-reused") {
					t.Errorf("another body under k1: %v, want 422 key-reused", r)
				}
				if r := mustOrder(t, srv.URL, "k2", ""); r.status != http.StatusBadRequest || string(r.body) != "an order needs an item\n" {
					t.Errorf("refused body: %v, want build's 400", r)
				}
				if r := mustOrder(t, srv.URL, "k2", "lamp"); r.status != http.StatusCreated || replayed(r) {
					t.Errorf("k2 after its refusal: %v, want a first 201: the refusal stored nothing", r)
				}
				if r := mustOrder(t, srv.URL, "", "lamp"); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "key-required") {
					t.Errorf("no key: %v, want 400 key-required", r)
				}
				resp, err := http.Get(srv.URL + "/checkout")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST, PATCH" {
					t.Errorf("GET: %s, Allow %q; want 405 with POST, PATCH", resp.Status, resp.Header.Get("Allow"))
				}

				p.FailNext(1)
				if r := mustOrder(t, srv.URL, "k5", "cup"); r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "unfinished") || r.header.Get("Retry-After") != "1" {
					t.Errorf("a failed charge: %v, want 503 unfinished with Retry-After 1", r)
				}
				if r := mustOrder(t, srv.URL, "k5", "cup"); r.status != http.StatusCreated || replayed(r) {
					t.Errorf("the retry of a failed charge: %v, want the fresh 201 of the resumed checkout", r)
				}
				if calls, charges := p.Counts("k5"); calls != 2 || charges != 1 {
					t.Errorf("k5: %d calls and %d charges, want 2 and 1", calls, charges)
				}

				concurrentDuplicates(t, e, p, srv.URL)
			})
		}
	})
}

// concurrentDuplicates holds the provider while the first request of k3
// is in its call, sends duplicates of it, each of which must get a 409
// with a Retry-After within the lease, and one alone, whose Retry-After
// must be the lease that is left, then lets the call go: the first request
// gets the one fresh 201, and every duplicate's retry the same bytes.
func concurrentDuplicates(t *testing.T, e *env, p *checkout.Provider, url string) {
	entered, release := p.Hold()
	defer release()
	firstDone := make(chan reply, 1)
	go func() {
		r, err := order(url, "k3", "pen")
		if err != nil {
			t.Error(err)
		}
		firstDone <- r
	}()
	<-entered // the first request is in its call, which holds the lease
	const duplicates = 4
	var wg sync.WaitGroup
	replies := make(chan reply, duplicates)
	for range duplicates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := order(url, "k3", "pen")
			if err != nil {
				t.Error(err)
				return
			}
			if r.status != http.StatusConflict || !strings.Contains(string(r.body), "in-flight") {
				t.Errorf("a duplicate while the first runs: %v, want 409 in-flight", r)
			} else if _, err := retryAfter(r, idem.DefaultLease); err != nil {
				t.Error(err)
			}
			replies <- r
		}()
	}
	wg.Wait()
	// Duplicates that meet at the claim may find each other there and
	// answer without reading the lease; one alone reads it, and asks for
	// more than the middleware's default delay, the lease that is left.
	alone, err := order(url, "k3", "pen")
	if err != nil {
		t.Fatal(err)
	}
	if wait, err := retryAfter(alone, idem.DefaultLease); err != nil || alone.status != http.StatusConflict || wait <= idemhttp.DefaultRetryAfter {
		t.Errorf("a duplicate alone: %v, Retry-After %q (%v); want 409 with more than %v, the lease that is left", alone, alone.header.Get("Retry-After"), err, idemhttp.DefaultRetryAfter)
	}
	release()
	first := <-firstDone
	if first.status != http.StatusCreated || replayed(first) {
		t.Fatalf("the first request: %v, want a fresh 201", first)
	}
	for range duplicates {
		r, err := orderUntilDone(url, "k3", "pen", idem.DefaultLease)
		if err != nil {
			t.Fatal(err)
		}
		if !replayed(r) || !bytes.Equal(r.body, first.body) {
			t.Errorf("a duplicate's retry: %v, want the first response %v, replayed", r, first)
		}
	}
	if calls, charges := p.Counts("k3"); calls != 1 || charges != 1 {
		t.Errorf("k3: %d calls and %d charges, want 1 and 1", calls, charges)
	}
}

// stepsChildEnv is set in the service process of TestStepsResumeAfterKill.
const stepsChildEnv = "IDEMHTTP_STEPS_CHILD"

// stepsLease is the lease of TestStepsResumeAfterKill's services: a
// client's retry waits out the killed one's.
const stepsLease = 2 * time.Second

// TestStepsResumeAfterKill serves the checkout from a service process,
// which a client's request makes call the provider, and kills the service
// with SIGKILL after the call, before the next phase. Then the service is
// started again, and three clients retry the request at once, each waiting
// as the Retry-After of a 409 says, which must be within the lease: one of
// them resumes the checkout once the dead service's lease has run out, and
// all get its one response; the provider made one charge, under the one
// call key that the killed service sent too, and each phase wrote its
// effect once. The targets run in parallel, since each waits out leases.
func TestStepsResumeAfterKill(t *testing.T) {
	forEachCallKeyTarget(t, func(t *testing.T, tg target) {
		t.Parallel()
		for _, via := range checkout.Ways(tg) {
			t.Run(via, func(t *testing.T) {
				e := setup(t, tg, idem.WithLease(stepsLease))
				p := checkout.NewProvider(t)
				const key = "checkout-killed"
				lost := make(chan error, 1)
				cmd := dbtest.StartChild(t, "TestStepsChild", checkout.AfterCall, func(line string) {
					if url, ok := strings.CutPrefix(line, "serving "); ok {
						go func() {
							_, err := order(url, key, "book")
							lost <- err
						}()
					}
				},
					append(e.ChildEnv(tg.Driver), stepsChildEnv+"=1", "IDEMHTTP_VIA="+via, "IDEMHTTP_PROVIDER="+p.URL())...)
				dbtest.Kill(t, cmd)
				if err := <-lost; err == nil {
					t.Fatal("the request to the killed service got an answer")
				}

				srv := httptest.NewServer(checkoutHandler(t, via, e.Store, e.DB, e.DSN, e.Effects, p.URL(), nil))
				defer srv.Close()
				replies := checkout.Together(t, 3, func() (reply, error) { return orderUntilDone(srv.URL, key, "book", stepsLease) })
				var fresh []reply
				var first reply
				for _, r := range replies {
					if r.status != http.StatusCreated {
						t.Errorf("a client got %v, want 201", r)
					}
					if !replayed(r) {
						fresh = append(fresh, r)
					}
					if first.body != nil && !bytes.Equal(r.body, first.body) {
						t.Errorf("two answers: %v and %v", first, r)
					}
					first = r
				}
				if len(fresh) != 1 {
					t.Errorf("%d clients ran the checkout, want one to resume it", len(fresh))
				}
				var body struct{ Charge string }
				if err := json.Unmarshal(first.body, &body); err != nil {
					t.Fatal(err)
				}
				checkout.Effects(t, e.Effects, idemhttp.StoredKey("", key), body.Charge)
				// The resumed request calls the provider again; a third
				// call is the takeover of a runner that a busy machine
				// held past its lease, with the same call key.
				if calls, charges := p.Counts(key); calls < 2 || charges != 1 {
					t.Errorf("%d calls and %d charges at the provider, want 2 or more and 1", calls, charges)
				}
				if keys := p.Keys(key); len(keys) != 1 {
					t.Errorf("call keys %q, want the killed service's alone", keys)
				}
			})
		}
	})
}

// TestStepsChild is the service process of TestStepsResumeAfterKill; it
// does nothing in a normal run.
func TestStepsChild(t *testing.T) {
	if os.Getenv(stepsChildEnv) == "" {
		t.Skip("the service process of TestStepsResumeAfterKill")
	}
	child := dbtest.OpenChild(t, idem.WithLease(stepsLease))
	h := checkoutHandler(t, os.Getenv("IDEMHTTP_VIA"), child.Store, child.DB, child.DSN, child.Effects,
		os.Getenv("IDEMHTTP_PROVIDER"), dbtest.DieAt(checkout.AfterCall))
	srv := httptest.NewServer(h)
	fmt.Println("serving " + srv.URL)
	select {} // until the parent's SIGKILL
}

// TestStepsFailures shows what Steps answers for each error of Run, from a
// Runner that returns it, and for a function that fails to build the
// steps: the problem, its Retry-After, and the error hook told of every
// failure of the server's.
func TestStepsFailures(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	var runErr error
	run := runnerfuncs.Runner{RunFunc: func(context.Context, string, []byte, []idem.Step) (idem.Result, error) {
		return idem.Result{}, runErr
	}}
	h := &hook{}
	m, err := idemhttp.NewWithRunner(store, run, idemhttp.WithSingleClient(), h.option())
	if err != nil {
		t.Fatal(err)
	}
	final := []idem.Step{idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, nil })}
	var buildErr error
	steps := m.Steps(func(*http.Request) ([]idem.Step, error) { return final, buildErr })
	stepFailed := errors.New("provider: 500 Internal Server Error")
	for _, c := range []struct {
		run, build error
		status     int
		kind       string
		retryAfter string
	}{
		{run: idem.ErrLeaseLost, status: 409, kind: "in-flight", retryAfter: "1"},
		{run: fmt.Errorf("idem: step %q: %w", "charge", stepFailed), status: 503, kind: "unfinished", retryAfter: "1"},
		{run: fmt.Errorf("idem: phase: %w", idem.ErrRetry), status: 503, kind: "unfinished", retryAfter: "1"},
		{run: idem.ErrCommitUnknown, status: 503, kind: "outcome-unknown", retryAfter: "1"},
		{run: idem.ErrResponseTooLarge, status: 500, kind: "response-too-large"},
		{run: idem.ErrCorruptRecord, status: 500, kind: "record-damaged"},
		{run: fmt.Errorf("%w: two steps named %q", idem.ErrInvalidArgument, "charge"), status: 500, kind: "internal-error"},
		{run: idem.ErrNoSteps, status: 500, kind: "internal-error"},
		{build: errors.New("no catalogue"), status: 500, kind: "internal-error"},
	} {
		runErr, buildErr = c.run, c.build
		before := len(h.reported())
		r := httptest.NewRequest(http.MethodPost, "/checkout", strings.NewReader(`{"item":"book"}`))
		r.Header.Set("Idempotency-Key", "k1")
		wantProblem(t, serveDirect(steps, r), c.status, c.kind, c.retryAfter)
		want := c.run
		if want == nil {
			want = c.build
		}
		if got := h.reported(); len(got) != before+1 || !errors.Is(got[len(got)-1], want) {
			t.Errorf("%v: the hook was told %v, want it", want, got[before:])
		}
	}
}
