package idempgx_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestContention lets 16 clients send requests whose handlers move money
// between two of a few hot accounts under SERIALIZABLE, so that PostgreSQL
// itself fails some of them (serialization failures, deadlocks), and hang
// up on some requests at a random moment, which makes pgx close the
// connection, also while a COMMIT is on its way. Clients send each request
// again with the same key until they keep a final answer, drop one final
// answer in four, and send some keys several times at once, half through
// DoTx and half through Do in a transaction of their own.
//
// At the end every key must have exactly one effect and a finished record
// naming that effect's attempt, and no client may have been answered with
// the response of an attempt whose effect was rolled back. A run that
// provoked no serialization failure or deadlock fails: it showed nothing.
// It runs on PostgreSQL itself and behind PgBouncer in transaction mode.
func TestContention(t *testing.T) {
	for _, tg := range pgxTargets() {
		t.Run(tg.name, func(t *testing.T) {
			if tg.dsn == "" {
				t.Skip(tg.skip)
			}
			contention(t, tg.dsn)
		})
	}
}

func contention(t *testing.T, url string) {
	e := setupOn(t, url, 20)
	ctx := context.Background()
	accounts := "accounts_" + strings.TrimPrefix(e.Table, "idem_")
	if _, err := e.DB.Exec("CREATE TABLE " + accounts + " (id INT PRIMARY KEY, n BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.DB.Exec("DROP TABLE " + accounts) })
	if _, err := e.DB.Exec("INSERT INTO " + accounts + " SELECT i, 0 FROM generate_series(0, 4) AS i"); err != nil {
		t.Fatal(err)
	}
	c := &pgxContention{e: e, accounts: accounts}
	start := time.Now()
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for key := range keys {
				c.request(t, key)
			}
		})
	}
	var issued []string
	for n := 0; ; n++ {
		elapsed := time.Since(start)
		if n >= 3000 || elapsed > 15*time.Second || (elapsed > 2*time.Second && c.retryable.Load() >= 5) {
			break
		}
		key := fmt.Sprintf("k%d", n)
		issued = append(issued, key)
		for range 1 + rand.N(4) {
			keys <- key
		}
	}
	close(keys)
	c.winding.Store(true)
	wg.Wait()
	t.Logf("%d keys in %v; fn ran %d times; serialization failures and deadlocks %d; hang-ups %d; answers %d",
		len(issued), time.Since(start).Round(time.Millisecond), c.attempts.Load(), c.retryable.Load(), c.hangUps.Load(), len(c.answers))
	if c.retryable.Load() == 0 {
		t.Errorf("no serialization failure or deadlock was provoked: this run showed nothing")
	}

	effects := map[string][]string{} // the attempts of the committed effects, by key
	rows, err := e.DB.QueryContext(ctx, "SELECT k, note FROM "+e.Effects.Table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, note string
		if err := rows.Scan(&k, &note); err != nil {
			t.Fatal(err)
		}
		effects[k] = append(effects[k], note)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for _, key := range issued {
		committed := effects[dbtest.EffectKey(key)]
		if len(committed) != 1 {
			t.Errorf("%s: %d effects %v, want 1", key, len(committed), committed)
		}
		res, err := idempgx.New(e.Store).Lookup(ctx, e.pool, key)
		switch {
		case err != nil || res.Outcome != idem.Replay:
			t.Errorf("%s: Lookup = %v, %v; want a finished record", key, res.Outcome, err)
		case !slices.Contains(committed, string(res.Response.Body)):
			t.Errorf("%s: the record names %q, committed effects %v", key, res.Response.Body, committed)
		}
	}
	for _, a := range c.answers {
		if committed := effects[dbtest.EffectKey(a.key)]; !slices.Contains(committed, a.attempt) {
			t.Errorf("%s: a client got %v naming %s, committed effects %v", a.key, a.outcome, a.attempt, committed)
		}
	}
}

// pgxContention is one run of TestContention.
type pgxContention struct {
	e         *env
	accounts  string
	winding   atomic.Bool  // no more keys are issued
	attempts  atomic.Int64 // numbers fn's attempts
	retryable atomic.Int64 // serialization failures and deadlocks in fn
	hangUps   atomic.Int64

	mu      sync.Mutex
	answers []pgxAnswer
}

type pgxAnswer struct {
	key, attempt string
	outcome      idem.Outcome
}

// request sends key until the client keeps a final answer.
func (c *pgxContention) request(t *testing.T, key string) {
	hash := idem.Fingerprint([]byte("POST /transfers"), []byte(key))
	for send := 1; send <= 300; send++ {
		res, err := c.send(key, hash)
		if err == nil && (res.Outcome == idem.Claimed || res.Outcome == idem.Replay) {
			c.mu.Lock()
			c.answers = append(c.answers, pgxAnswer{key, string(res.Response.Body), res.Outcome})
			c.mu.Unlock()
			if c.winding.Load() || rand.N(4) != 0 {
				return
			}
		}
		if err == nil && res.Outcome == idem.Mismatch {
			t.Errorf("%s: Mismatch for a request sent again unchanged", key)
			return
		}
		time.Sleep(rand.N(time.Millisecond<<min(send, 5)) + time.Millisecond)
	}
	t.Errorf("%s: no final answer after 300 sends", key)
}

// send is one send of key, through DoTx or through Do in the client's own
// transaction, with a context that ends at a random moment one time in
// four: between 1 ms and 100 ms, spread on a log scale.
func (c *pgxContention) send(key string, hash []byte) (idem.Result, error) {
	ctx := context.Background()
	if rand.N(4) == 0 {
		const lo, hi = float64(time.Millisecond), float64(100 * time.Millisecond)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(lo*math.Pow(hi/lo, rand.Float64())))
		defer cancel()
		defer func() {
			if ctx.Err() != nil {
				c.hangUps.Add(1)
			}
		}()
	}
	opts := pgx.TxOptions{IsoLevel: pgx.Serializable}
	if rand.N(2) == 0 {
		return idempgx.New(c.e.Store).DoTx(ctx, c.e.pool, opts, key, hash, c.handler(key))
	}
	tx, err := c.e.pool.BeginTx(ctx, opts)
	if err != nil {
		return idem.Result{}, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	res, err := idempgx.New(c.e.Store).Do(ctx, tx, key, hash, c.handler(key))
	if err == nil && res.Outcome == idem.Claimed {
		err = tx.Commit(ctx)
	}
	return res, err
}

// handler writes the key's effect, tagged with a new attempt, then moves a
// unit between two hot accounts, reading both first, in random order; it
// answers with its attempt.
func (c *pgxContention) handler(key string) idempgx.Func {
	return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
		attempt := fmt.Sprintf("%s.%d", key, c.attempts.Add(1))
		err := c.work(ctx, tx, key, attempt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
			c.retryable.Add(1)
		}
		if err != nil {
			return idem.Response{}, err
		}
		return idem.Response{Status: 201, Body: []byte(attempt)}, nil
	}
}

func (c *pgxContention) work(ctx context.Context, tx pgx.Tx, key, attempt string) error {
	if _, err := tx.Exec(ctx, c.e.Effects.InsertSQL(), dbtest.EffectKey(key), attempt); err != nil {
		return err
	}
	ids := rand.Perm(5)[:2]
	for _, id := range ids {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT n FROM "+c.accounts+" WHERE id = $1", id).Scan(&n); err != nil {
			return err
		}
	}
	for i, id := range ids {
		if _, err := tx.Exec(ctx, "UPDATE "+c.accounts+" SET n = n + $1 WHERE id = $2", 2*i-1, id); err != nil {
			return err
		}
	}
	return nil
}
