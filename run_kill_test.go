package idem_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/internal/dbtest"
)

// provider is a payment provider that really runs, on loopback: it charges
// once per idempotency key and answers a repeated call with the charge it
// made. It counts calls and charges apart, by key. fail makes it answer
// the next calls with 500 without charging; slow makes it charge, then
// answer after a pause.
type provider struct {
	srv *httptest.Server

	mu      sync.Mutex
	charges map[string]string // by idempotency key
	calls   map[string]int    // by the request's key, which the test sends along
	charged map[string]int    // by the request's key
	fail    int
	slow    time.Duration
}

func newProvider(t *testing.T) *provider {
	p := &provider{charges: map[string]string{}, calls: map[string]int{}, charged: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	key, order := r.Header.Get("Idempotency-Key"), r.Header.Get("X-Order")
	p.mu.Lock()
	p.calls[order]++
	if p.fail > 0 {
		p.fail--
		p.mu.Unlock()
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	id, ok := p.charges[key]
	if !ok {
		id = fmt.Sprintf("ch_%d", len(p.charges)+1)
		p.charges[key] = id
		p.charged[order]++
	}
	slow := p.slow
	p.mu.Unlock()
	time.Sleep(slow)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// counts returns the calls and the charges for the request with key.
func (p *provider) counts(key string) (calls, charges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[key], p.charged[key]
}

// charge calls the provider at url for the request with key, with callKey
// as the idempotency key, and returns the charge's id.
func charge(ctx context.Context, url, key, callKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Idempotency-Key", callKey)
	req.Header.Set("X-Order", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("provider: %s", resp.Status)
	}
	var body struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.ID, nil
}

// The boundaries at which TestRunSurvivesKills kills the service.
const (
	killBeforeOrderCommit   = "before the commit of order"
	killBeforeCall          = "after the commit of order, before the call"
	killAfterCall           = "after the call, before the next phase"
	killBeforeChargedCommit = "before the commit of charged"
	killAfterChargedCommit  = "after the commit of charged"
	killBeforeConfirmCommit = "before the commit of confirm"
	killAfterConfirmCommit  = "after the commit of confirm"
	runChildEnv             = "IDEM_RUN_CHILD" // set in the child process
)

var killPoints = []string{killBeforeOrderCommit, killBeforeCall, killAfterCall, killBeforeChargedCommit,
	killAfterChargedCommit, killBeforeConfirmCommit, killAfterConfirmCommit}

// txOps sends the statements of the checkout's phases through a driver's
// transaction.
type txOps[TX any] struct {
	exec func(ctx context.Context, tx TX, query string, args ...any) error
	scan func(ctx context.Context, tx TX, query string, args []any, dest ...any) error
}

var (
	sqlOps = txOps[*sql.Tx]{
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		},
		scan: func(ctx context.Context, tx *sql.Tx, q string, args []any, dest ...any) error {
			return tx.QueryRowContext(ctx, q, args...).Scan(dest...)
		},
	}
	pgxOps = txOps[pgx.Tx]{
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		scan: func(ctx context.Context, tx pgx.Tx, q string, args []any, dest ...any) error {
			return tx.QueryRow(ctx, q, args...).Scan(dest...)
		},
	}
)

// checkout is the multi-step request of the kill tests, on database/sql.
func checkout(fx *dbtest.Effects, url, key string, die func(point string)) []idem.Step {
	return checkoutOn(sqlOps, fx, url, key, die)
}

// checkoutOn is the multi-step request of the kill tests, on a driver
// whose phases send their statements with ops: the order phase, the
// charge at the provider, the charged phase, which stores the charge's id,
// and the final phase, which reads it back for the response. Each phase
// writes one effect row noted with its name. die is called at each
// boundary.
func checkoutOn[TX any](ops txOps[TX], fx *dbtest.Effects, url, key string, die func(point string)) []idem.Step {
	var chargeID string
	insert := func(ctx context.Context, tx TX, note string) error {
		return ops.exec(ctx, tx, fx.InsertSQL(), dbtest.EffectKey(key), note)
	}
	return []idem.Step{
		idem.Phase("order", func(ctx context.Context, tx TX) error {
			err := insert(ctx, tx, "order")
			die(killBeforeOrderCommit)
			return err
		}),
		idem.Call("charge", func(ctx context.Context, callKey string) (err error) {
			die(killBeforeCall)
			chargeID, err = charge(ctx, url, key, callKey)
			die(killAfterCall)
			return err
		}),
		idem.Phase("charged", func(ctx context.Context, tx TX) error {
			err := insert(ctx, tx, "charged "+chargeID)
			die(killBeforeChargedCommit)
			return err
		}),
		idem.Final("confirm", func(ctx context.Context, tx TX) (idem.Response, error) {
			die(killAfterChargedCommit)
			var note string
			q := "SELECT note FROM " + fx.Table + " WHERE k = " + fx.Placeholder(1) + " AND note LIKE 'charged %'"
			if err := ops.scan(ctx, tx, q, []any{dbtest.EffectKey(key)}, &note); err != nil {
				return idem.Response{}, err
			}
			err := insert(ctx, tx, "confirm")
			die(killBeforeConfirmCommit)
			return idem.Response{Status: http.StatusCreated, Body: []byte(strings.TrimPrefix(note, "charged "))}, err
		}),
	}
}

// TestRunSurvivesKills runs two checkouts in a service process and kills it
// with SIGKILL at one boundary of their steps, for each boundary in turn.
// Then clients retry the first checkout concurrently, and Resume takes
// the second, whose client gave up. Every checkout must end finished, with
// one charge at the provider, one effect per phase, a second call only when
// the kill fell between the call and the next phase's commit, and every
// answer the stored response.
func TestRunSurvivesKills(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		for _, via := range checkoutDrivers(tg) {
			t.Run(via, func(t *testing.T) { testRunSurvivesKills(t, tg, via) })
		}
	})
}

// Ways to run the checkout: through database/sql, and, on PostgreSQL, on a
// pgx pool through package idempgx.
const (
	viaSQL     = "database-sql"
	viaPgxPool = "pgxpool"
)

// checkoutDrivers lists the ways to run the checkout on tg.
func checkoutDrivers(tg target) []string {
	if tg.Family == "postgres" && tg.Driver == "pgx" {
		return []string{viaSQL, viaPgxPool}
	}
	return []string{viaSQL}
}

// runCheckout runs the checkout of key on e's store and database, or,
// with a pool, through idempgx on the pool.
func runCheckout(e *env, pool *pgxpool.Pool, url, key string, die func(string)) (idem.Result, error) {
	if pool == nil {
		return e.Store.Run(context.Background(), e.DB, nil, key, hashA, checkout(e.Effects, url, key, die)...)
	}
	return idempgx.New(e.Store).Run(context.Background(), pool, pgx.TxOptions{}, key, hashA, checkoutOn(pgxOps, e.Effects, url, key, die)...)
}

// newPool returns a pgx pool of dsn, closed at the end of the test.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// testRunSurvivesKills is TestRunSurvivesKills on tg, with the checkout run
// via database/sql or a pgx pool.
func testRunSurvivesKills(t *testing.T, tg target, via string) {
	for _, point := range killPoints {
		t.Run(point, func(t *testing.T) {
			var pool *pgxpool.Pool
			// The service's leases run on the database's real
			// clock; the clients' reading of it is ahead by more
			// than a lease, so the dead service's leases have run
			// out for them at once, while among themselves theirs
			// run as usual. Their own clock is ahead as much, for
			// Resume's age.
			ahead := idem.DefaultLease + time.Minute
			e := setup(t, tg, idem.WithClock(func() time.Time { return time.Now().Add(ahead) }),
				leaseClock(func() time.Duration { return ahead }))
			if via == viaPgxPool {
				pool = newPool(t, e.DSN)
			}
			p := newProvider(t)
			retried, abandoned := "checkout-retried", "checkout-abandoned"
			for _, key := range []string{retried, abandoned} {
				killService(t, e, via, p.srv.URL, point, key)
			}

			var (
				wg      sync.WaitGroup
				answers = make(chan idem.Result, 4)
			)
			for range cap(answers) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := retryUntilDone(e, pool, p.srv.URL, retried)
					if err != nil {
						t.Error(err)
						return
					}
					answers <- res
				}()
			}
			wg.Wait()
			close(answers)

			var err error
			if pool != nil {
				steps := func(_ context.Context, key string) ([]idem.Step, error) {
					return checkoutOn(pgxOps, e.Effects, p.srv.URL, key, func(string) {}), nil
				}
				_, err = idempgx.New(e.Store).Resume(context.Background(), pool, pgx.TxOptions{}, steps, idem.ResumeOlderThan(time.Minute))
			} else {
				steps := func(_ context.Context, key string) ([]idem.Step, error) {
					return checkout(e.Effects, p.srv.URL, key, func(string) {}), nil
				}
				_, err = e.Store.Resume(context.Background(), e.DB, nil, steps, idem.ResumeOlderThan(time.Minute))
			}
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}

			for _, key := range []string{retried, abandoned} {
				stored, err := e.Store.Lookup(context.Background(), e.DB, key)
				wantOutcome(t, stored, err, idem.Replay)
				if !strings.HasPrefix(string(stored.Response.Body), "ch_") {
					t.Errorf("%s: stored body %q, want the charge's id", key, stored.Response.Body)
				}
				notes := e.Effects.Notes(t)[key]
				if len(notes) != 3 || notes[0] != "order" || notes[1] != "charged "+string(stored.Response.Body) || notes[2] != "confirm" {
					t.Errorf("%s: effects %q, want each phase once, in order", key, notes)
				}
				calls, charges := p.counts(key)
				wantCalls := 1
				if point == killAfterCall || point == killBeforeChargedCommit {
					wantCalls = 2
				}
				if charges != 1 || calls != wantCalls {
					t.Errorf("%s: %d calls and %d charges at the provider, want %d and 1", key, calls, charges, wantCalls)
				}
				if key == retried {
					n := 0
					for res := range answers {
						n++
						sameResponse(t, res.Response, stored.Response)
					}
					if n != cap(answers) {
						t.Errorf("%d of %d clients got an answer", n, cap(answers))
					}
				}
			}
			if list, err := e.Store.Unfinished(context.Background(), e.DB, 0, 10); err != nil || len(list) != 0 {
				t.Errorf("unfinished at the end: %+v, %v", list, err)
			}
		})
	}
}

// retryUntilDone is a client that retries the checkout key until it gets a
// final answer: InFlight means another client runs it, so it asks again.
func retryUntilDone(e *env, pool *pgxpool.Pool, url, key string) (idem.Result, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		res, err := runCheckout(e, pool, url, key, func(string) {})
		switch {
		case errors.Is(err, idem.ErrLeaseLost):
			return res, fmt.Errorf("a client lost its lease: %w", err)
		case err != nil && !errors.Is(err, idem.ErrRetry):
			return res, err
		case err == nil && res.Outcome != idem.InFlight:
			return res, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return idem.Result{}, errors.New("no final answer within a minute")
}

// killService starts this test binary as a service that runs the checkout
// of key, waits until it has reached point, and kills it.
func killService(t *testing.T, e *env, via, url, point, key string) {
	t.Helper()
	cmd := startChild(t, "TestRunChild", point,
		runChildEnv+"=1",
		"IDEM_RUN_VIA="+via,
		"IDEM_RUN_DRIVER="+e.tg.Driver,
		"IDEM_RUN_DSN="+e.DSN,
		"IDEM_RUN_DIALECT="+e.Dialect.Name(),
		"IDEM_RUN_TABLE="+e.Table,
		"IDEM_RUN_EFFECTS="+e.Effects.Table,
		"IDEM_RUN_PROVIDER="+url,
		"IDEM_RUN_POINT="+point,
		"IDEM_RUN_KEY="+key,
	)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred function runs
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// TestRunChild is the service process of TestRunSurvivesKills; it does
// nothing in a normal run.
func TestRunChild(t *testing.T) {
	if os.Getenv(runChildEnv) == "" {
		t.Skip("the service process of TestRunSurvivesKills")
	}
	dialects := map[string]idem.Dialect{"postgres": idem.Postgres(), "mysql": idem.MySQL(), "mariadb": idem.MariaDB(), "sqlite": idem.SQLite()}
	d := dialects[os.Getenv("IDEM_RUN_DIALECT")]
	db, err := sql.Open(os.Getenv("IDEM_RUN_DRIVER"), os.Getenv("IDEM_RUN_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := idem.New(d, idem.WithTable(os.Getenv("IDEM_RUN_TABLE")))
	if err != nil {
		t.Fatal(err)
	}
	fx := dbtest.OpenEffects(d, db, os.Getenv("IDEM_RUN_EFFECTS"))
	point, key := os.Getenv("IDEM_RUN_POINT"), os.Getenv("IDEM_RUN_KEY")
	die := func(at string) {
		if at == point {
			fmt.Println(crashReadyMessage)
			select {} // until the parent's SIGKILL
		}
	}
	url := os.Getenv("IDEM_RUN_PROVIDER")
	if os.Getenv("IDEM_RUN_VIA") == viaPgxPool {
		_, err = idempgx.New(store).Run(context.Background(), newPool(t, os.Getenv("IDEM_RUN_DSN")), pgx.TxOptions{}, key, hashA, checkoutOn(pgxOps, fx, url, key, die)...)
	} else {
		_, err = store.Run(context.Background(), db, nil, key, hashA, checkout(fx, url, key, die)...)
	}
	if err == nil {
		die(killAfterConfirmCommit)
	}
	t.Fatalf("the checkout ended before %s: %v", point, err)
}

// TestRunProviderFaults has the provider fail a call, and answer another
// too late for its caller, after charging: each time the retry calls again
// with the same key, and the provider charges once.
func TestRunProviderFaults(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		p := newProvider(t)
		run := func(ctx context.Context, key string) (idem.Result, error) {
			return e.Store.Run(ctx, e.DB, nil, key, hashA, checkout(e.Effects, p.srv.URL, key, func(string) {})...)
		}
		p.mu.Lock()
		p.fail = 1
		p.mu.Unlock()
		if _, err := run(context.Background(), "fails"); err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("Run: %v, want the provider's 500", err)
		}
		p.mu.Lock()
		p.slow = 300 * time.Millisecond
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := run(ctx, "slow")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run: %v, want the caller's deadline", err)
		}
		p.mu.Lock()
		p.slow = 0
		p.mu.Unlock()

		for _, key := range []string{"fails", "slow"} {
			res, err := run(context.Background(), key)
			wantOutcome(t, res, err, idem.Claimed)
			if calls, charges := p.counts(key); calls != 2 || charges != 1 {
				t.Errorf("%s: %d calls and %d charges, want 2 and 1", key, calls, charges)
			}
			if notes := e.Effects.Notes(t)[key]; len(notes) != 3 {
				t.Errorf("%s: effects %q, want each phase once", key, notes)
			}
		}
	})
}

// TestRunRecoversAfterKill kills the service right after its call to the
// provider, with no clock moved: a client that retries when the InFlight
// answer's LeaseLeft has passed takes the request over, on the database's
// own clock, within two DefaultLeases of the kill, and finishes it. The
// test prints the time it took. The targets run in parallel, since each
// waits out a real lease.
func TestRunRecoversAfterKill(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		if strings.Contains(tg.Name, "interpolate") {
			t.Skip("the same statements as the target without the driver's settings")
		}
		t.Parallel()
		e := setup(t, tg)
		p := newProvider(t)
		const key = "checkout-killed"
		killService(t, e, viaSQL, p.srv.URL, killAfterCall, key)
		killed := time.Now()
		for inFlight := 0; ; inFlight++ {
			res, err := e.Store.Run(context.Background(), e.DB, nil, key, hashA, checkout(e.Effects, p.srv.URL, key, func(string) {})...)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != idem.InFlight {
				took := time.Since(killed)
				t.Logf("%s: %v from the kill to the retry's answer, after %d InFlight answers", tg.Name, took.Round(time.Millisecond), inFlight)
				wantOutcome(t, res, err, idem.Claimed)
				if took > 2*idem.DefaultLease {
					t.Errorf("took %v, want at most 2 × DefaultLease, %v", took, 2*idem.DefaultLease)
				}
				break
			}
			if res.LeaseLeft <= 0 || res.LeaseLeft > idem.DefaultLease || time.Since(killed) > 2*idem.DefaultLease {
				t.Fatalf("InFlight with %v of the lease left, %v after the kill", res.LeaseLeft, time.Since(killed))
			}
			time.Sleep(res.LeaseLeft)
		}
		if calls, charges := p.counts(key); calls != 2 || charges != 1 {
			t.Errorf("%d calls and %d charges at the provider, want 2 and 1", calls, charges)
		}
	})
}
