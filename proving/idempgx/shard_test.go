package idempgx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// shardTargets are the databases of TestShardColumnOnPgx: PostgreSQL,
// PgBouncer in transaction mode and a Citus coordinator, each reached
// through database/sql's pgx driver to set the tables up and through a
// pgx pool to serve the requests.
func shardTargets() []struct {
	target dbtest.Target
	dsn    string
	skip   string
} {
	bouncer := dbtest.PgBouncerDSN()
	if bouncer != "" {
		bouncer = dbtest.WithParams(bouncer, dbtest.PgxPoolerParams)
	}
	pg := func(name, dsn string, distributed bool) dbtest.Target {
		return dbtest.Target{Name: name, Family: "postgres", Dialect: idem.Postgres(), Driver: "pgx",
			DSN: func(testing.TB) string { return dsn }, Distributed: distributed}
	}
	return []struct {
		target dbtest.Target
		dsn    string
		skip   string
	}{
		{pg("postgres/pgxpool", os.Getenv(envPostgres), false), os.Getenv(envPostgres),
			envPostgres + " is not set: run scripts/test from the repository root, which starts PostgreSQL"},
		{pg("postgres/pgbouncer/pgxpool", bouncer, false), bouncer, dbtest.SkipPgBouncerReason},
		{pg("postgres/citus/pgxpool", os.Getenv(dbtest.EnvCitus), true), os.Getenv(dbtest.EnvCitus), dbtest.SkipCitusReason},
	}
}

// TestShardColumnOnPgx shows the shard value reaching a Store with a
// shard column through idempgx's Do, DoTx and Run, on PostgreSQL, behind
// PgBouncer and on Citus, whose orders table is distributed by customer
// with idem's table in its co-location group (dbtest.SetupByCustomer): two
// customers' requests with one key each run and place an order of their
// own, a retry of each replays, the steps of Run see the value in their
// context, and a call without a shard value is refused with
// ErrInvalidArgument, with nothing run or stored.
func TestShardColumnOnPgx(t *testing.T) {
	for _, tg := range shardTargets() {
		t.Run(tg.target.Name, func(t *testing.T) {
			if tg.dsn == "" {
				t.Skip(tg.skip)
			}
			shardColumnOnPgx(t, tg.target, tg.dsn)
		})
	}
}

func shardColumnOnPgx(t *testing.T, tg dbtest.Target, dsn string) {
	e, orders := tg.SetupByCustomer(t)
	bg := context.Background()
	pool, err := pgxpool.New(bg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pg := idempgx.New(e.Store)
	insert := "INSERT INTO " + orders.Table + " (customer_id, k, note) VALUES ($1, $2, 'done')"
	// placeIn writes the order of the context's customer for key in tx.
	placeIn := func(ctx context.Context, tx pgx.Tx, key string) error {
		v, ok := idem.ShardFrom(ctx)
		if !ok {
			return errors.New("no shard value in the context")
		}
		_, err := tx.Exec(ctx, insert, v, dbtest.EffectKey(key))
		return err
	}
	place := func(key string) idempgx.Func {
		return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
			return created, placeIn(ctx, tx, key)
		}
	}
	do := func(ctx context.Context, key string) (idem.Result, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(bg) }()
		res, err := pg.Do(ctx, tx, key, hashA, place(key))
		if err != nil {
			return res, err
		}
		return res, tx.Commit(ctx)
	}
	doTx := func(ctx context.Context, key string) (idem.Result, error) {
		return pg.DoTx(ctx, pool, pgx.TxOptions{}, key, hashA, place(key))
	}
	run := func(ctx context.Context, key string) (idem.Result, error) {
		return pg.Run(ctx, pool, pgx.TxOptions{}, key, hashA,
			idem.Phase("order", func(ctx context.Context, tx pgx.Tx) error { return placeIn(ctx, tx, key) }),
			idem.Final("answer", func(context.Context, pgx.Tx) (idem.Response, error) { return created, nil }))
	}
	alice, bob := idem.WithShard(bg, int64(7)), idem.WithShard(bg, int64(8))
	for _, c := range []struct {
		name string
		call func(context.Context, string) (idem.Result, error)
	}{{"Do", do}, {"DoTx", doTx}, {"Run", run}} {
		key := "order-" + c.name
		for _, step := range []struct {
			who  string
			ctx  context.Context
			want idem.Outcome
		}{{"7", alice, idem.Claimed}, {"8", bob, idem.Claimed}, {"7 again", alice, idem.Replay}, {"8 again", bob, idem.Replay}} {
			res, err := c.call(step.ctx, key)
			if err != nil || res.Outcome != step.want {
				t.Fatalf("%s of %s as customer %s: %v, %v; want %v", c.name, key, step.who, res.Outcome, err, step.want)
			}
		}
		for _, customer := range []int64{7, 8} {
			if n := orders.Count(t, customer, key); n != 1 {
				t.Errorf("customer %d has %d orders %s, want 1", customer, n, key)
			}
			res, err := pg.Lookup(idem.WithShard(bg, customer), pool, key)
			if err != nil || res.Outcome != idem.Replay {
				t.Errorf("Lookup of customer %d's %s: %v, %v; want its stored response", customer, key, res.Outcome, err)
			}
		}
		if _, err := c.call(bg, "order-none"); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s without a shard value: %v, want ErrInvalidArgument", c.name, err)
		}
	}
	if _, err := pg.Lookup(bg, pool, "order-Do"); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Lookup without a shard value: %v, want ErrInvalidArgument", err)
	}
	wantRows(t, e, e.Table, 6)
	wantRows(t, e, orders.Table, 6)
}

// wantRows fails the test unless table holds n rows, of every customer.
func wantRows(t *testing.T, e *dbtest.Env, table string, n int) {
	t.Helper()
	var got int
	if err := e.DB.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("%s holds %d rows, want %d: a call without a shard value must store nothing", table, got, n)
	}
}

// TestShardFromMiddlewareOnPgx shows the shard value reaching the Store
// through idempgx.NewMiddleware, idemhttp's middleware on a pgx pool, on
// the databases of TestShardColumnOnPgx: a middleware in front of it sets
// the value from the request's X-Customer header, two customers' requests
// with one Idempotency-Key each place an order, a retry replays, and a
// request without a customer is answered 500 with ErrInvalidArgument
// reported to the error hook, the handler not run and nothing stored.
func TestShardFromMiddlewareOnPgx(t *testing.T) {
	for _, tg := range shardTargets() {
		t.Run(tg.target.Name, func(t *testing.T) {
			if tg.dsn == "" {
				t.Skip(tg.skip)
			}
			shardFromMiddlewareOnPgx(t, tg.target, tg.dsn)
		})
	}
}

func shardFromMiddlewareOnPgx(t *testing.T, tg dbtest.Target, dsn string) {
	e, orders := tg.SetupByCustomer(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var (
		mu       sync.Mutex
		reported []error
		runs     int
	)
	hook := idemhttp.WithErrorHook(func(_ *http.Request, err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	})
	m, err := idempgx.NewMiddleware(e.Store, pool, pgx.TxOptions{}, idemhttp.WithSingleClient(), hook)
	if err != nil {
		t.Fatal(err)
	}
	insert := "INSERT INTO " + orders.Table + " (customer_id, k, note) VALUES ($1, $2, 'done')"
	place := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		customer, ok := idem.ShardFrom(r.Context())
		if !ok {
			http.Error(w, "no customer", http.StatusInternalServerError)
			return
		}
		if _, err := idempgx.Tx(r.Context()).Exec(r.Context(), insert, customer, dbtest.EffectKey(r.Header.Get("Idempotency-Key"))); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		mu.Lock()
		runs++
		n := runs
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d of customer %v", n, customer)
	})
	// byCustomer is the middleware in front of idemhttp's.
	byCustomer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.Header.Get("X-Customer"); v != "" {
				id, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					http.Error(w, "bad customer", http.StatusBadRequest)
					return
				}
				r = r.WithContext(idem.WithShard(r.Context(), id))
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(byCustomer(m.Handler(place)))
	defer srv.Close()
	send := func(customer, key string) (int, string, bool) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		if customer != "" {
			req.Header.Set("X-Customer", customer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get(idemhttp.ReplayedHeader) == "true"
	}
	for _, c := range []struct {
		customer string
		body     string
		replayed bool
	}{{"7", "order 1 of customer 7", false}, {"8", "order 2 of customer 8", false}, {"7", "order 1 of customer 7", true}} {
		status, body, replayed := send(c.customer, "k1")
		if status != http.StatusCreated || body != c.body || replayed != c.replayed {
			t.Fatalf("customer %s: %d %q, replayed %v; want 201 %q, replayed %v", c.customer, status, body, replayed, c.body, c.replayed)
		}
	}
	if status, body, _ := send("", "k2"); status != http.StatusInternalServerError {
		t.Errorf("no customer: %d %q, want 500", status, body)
	}
	mu.Lock()
	if len(reported) != 1 || !errors.Is(reported[0], idem.ErrInvalidArgument) || runs != 2 {
		t.Errorf("hook got %v and the handler ran %d times; want one ErrInvalidArgument and 2 runs", reported, runs)
	}
	mu.Unlock()
	wantRows(t, e, e.Table, 2)
	wantRows(t, e, orders.Table, 2)
}
