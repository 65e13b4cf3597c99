package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

// contentionFull selects the long version of TestContention. It runs for
// minutes: give go test a -timeout of 20m or more.
var contentionFull = flag.Bool("contention.full", false, "run TestContention with more workers, more keys and for longer")

// TestContention lets many clients send requests whose handlers move money
// between two of a few hot accounts, locking them in random order, so that
// the database itself makes some of them fail: deadlocks, snapshot
// conflicts, serialization failures, and on SQLite statements interrupted
// by a client that hangs up. Nothing is orchestrated: the failures come
// where the database puts them, at its default settings.
// Clients send each request again with the same key until they keep a final
// answer, pretend now and then that an answer was lost, and send some keys
// several times at once. Both ways of calling idem are used, and some
// handlers turn a database error into a 409, as handlers often do.
//
// At the end every key must have exactly one effect, a finished record that
// names that effect's attempt, and no client may have been answered with a
// response of an attempt whose effect was rolled back. A configuration that
// provoked no retryable failure fails, since it would have shown nothing.
//
// The short version runs a few seconds per configuration; -contention.full
// runs the long one.
func TestContention(t *testing.T) {
	size := shortContention
	if *contentionFull {
		size = fullContention
	}
	each := func(f func(t *testing.T, tg target)) {
		dbtest.ForEachPooled(t, f)
		dbtest.ForEachVitess(t, f)
		dbtest.ForEachCitus(t, f)
	}
	each(func(t *testing.T, tg target) {
		settings, skip := contentionSettings(tg)
		if skip != "" {
			t.Skip(skip)
		}
		for _, s := range settings {
			t.Run(s.name, func(t *testing.T) {
				c := newContention(t, s, size)
				issuing, total := c.run()
				c.log(issuing, total)
				c.check()
			})
		}
	})
}

// contentionSize bounds one configuration's run. The run issues new keys
// until it has issued maxKeys, or has run maxRun, or has run minRun and
// provoked minFailures retryable failures; then the clients finish the keys
// they have. Each bound is a count or a time, so the run always ends, and
// slow machines run longer rather than fail.
type contentionSize struct {
	workers        int // clients sending at once
	accounts       int // hot rows; each handler moves money between 2 of them
	minRun, maxRun time.Duration
	minFailures    int
	maxKeys        int
	maxSends       int // sends of one request before its client gives up
}

var (
	shortContention = contentionSize{
		workers: 16, accounts: 5,
		minRun: 2 * time.Second, maxRun: 10 * time.Second, minFailures: 5,
		maxKeys: 3000, maxSends: 300,
	}
	fullContention = contentionSize{
		workers: 32, accounts: 5,
		minRun: 30 * time.Second, maxRun: 90 * time.Second, minFailures: 100,
		maxKeys: 200000, maxSends: 1000,
	}
)

// contentionSetting is one configuration: a database with its session
// settings, the isolation level of every transaction, and whether clients
// hang up, which is how SQLite, with one writer at a time, gets its failures.
type contentionSetting struct {
	name    string
	tg      target
	opts    *sql.TxOptions
	hangUps bool
}

// contentionSettings returns the configurations to run on tg, or why tg is
// skipped.
func contentionSettings(tg target) ([]contentionSetting, string) {
	switch tg.Name {
	case "postgres/pq":
		var ss []contentionSetting
		for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
			ss = append(ss, contentionSetting{name: levelName(level), tg: tg, opts: &sql.TxOptions{Isolation: level}})
		}
		return ss, ""
	case "postgres/pgbouncer/pq", "postgres/pgbouncer/pgx":
		// Behind PgBouncer the database is the same: one level, the one
		// that fails the most, shows that a pooler in transaction mode
		// changes no outcome, for both drivers.
		return []contentionSetting{{name: levelName(sql.LevelSerializable), tg: tg, opts: &sql.TxOptions{Isolation: sql.LevelSerializable}}}, ""
	case "postgres/citus/pq", "postgres/citus/pgx":
		// Citus begins each worker's part of a transaction at the
		// coordinator's level, but each worker keeps snapshots of its
		// own: every level runs, through both drivers.
		var ss []contentionSetting
		for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
			ss = append(ss, contentionSetting{name: levelName(level), tg: tg, opts: &sql.TxOptions{Isolation: level}})
		}
		return ss, ""
	case "mariadb":
		var ss []contentionSetting
		for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead} {
			for _, snapshot := range []string{"OFF", "ON"} {
				ss = append(ss, contentionSetting{
					name: levelName(level) + "/snapshot-isolation-" + strings.ToLower(snapshot),
					tg:   withSession(tg, "innodb_snapshot_isolation="+snapshot),
					opts: &sql.TxOptions{Isolation: level},
				})
			}
		}
		return ss, ""
	case "mariadb/MySQL":
		// The MySQL dialect on MariaDB, where it meets MariaDB's own
		// conflicts (1020) under snapshot isolation.
		return []contentionSetting{
			{name: "read-committed", tg: withSession(tg, "innodb_snapshot_isolation=OFF"), opts: &sql.TxOptions{Isolation: sql.LevelReadCommitted}},
			{name: "repeatable-read/snapshot-isolation-on", tg: withSession(tg, "innodb_snapshot_isolation=ON"), opts: &sql.TxOptions{Isolation: sql.LevelRepeatableRead}},
		}, ""
	case "mysql":
		var ss []contentionSetting
		for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead} {
			ss = append(ss, contentionSetting{name: levelName(level), tg: tg, opts: &sql.TxOptions{Isolation: level}})
		}
		return ss, ""
	case "vitess":
		// A request's transfer keeps to the shard of its key, between
		// hot accounts there (shardAccounts).
		var ss []contentionSetting
		for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead} {
			ss = append(ss, contentionSetting{name: levelName(level), tg: tg, opts: &sql.TxOptions{Isolation: level}})
		}
		return ss, ""
	case "tidb", "tidb/optimistic":
		// TiDB's optimistic transactions offer its snapshot isolation
		// alone, which database/sql's default asks for.
		return []contentionSetting{{name: "default", tg: tg}}, ""
	case "sqlite":
		return []contentionSetting{{name: "interrupted", tg: tg, hangUps: true}}, ""
	}
	return nil, "the contention is the database's, not the driver's: one target per database runs it"
}

// levelName names an isolation level as a subtest: "read-committed".
func levelName(level sql.IsolationLevel) string {
	return strings.ReplaceAll(strings.ToLower(level.String()), " ", "-")
}

// withSession returns tg with a MariaDB session variable set on every
// connection: go-sql-driver/mysql sends the DSN's unknown parameters as SET.
// Both values are set explicitly, since newer MariaDB releases default
// innodb_snapshot_isolation to ON.
func withSession(tg target, param string) target {
	return dbtest.TargetWithParams(tg, param)
}

// ledgerRows sizes SQLite's long write: an update of every row, long
// enough that a client's hang-up often lands inside it.
const ledgerRows = 8000

// contention is one configuration's run: its store and tables, what the
// handlers' statements provoked, and what the clients were answered.
type contention struct {
	t       *testing.T
	e       *env
	opts    *sql.TxOptions
	hangUps bool
	size    contentionSize

	read, update string // statements on the hot accounts
	// shardAccounts, on Vitess's sharded keyspace, are the ids of the hot
	// accounts on each shard, size.accounts of them: a transaction may
	// touch one shard, the key's.
	shardAccounts map[string][]int
	ledger        string // the table of SQLite's long write, or ""

	keys     []string     // every key issued, written only by run
	winding  atomic.Bool  // run issues no more keys
	attempts atomic.Int64 // numbers the handlers' attempts
	failures tally        // retryable failures of fn's statements, by kind
	others   tally        // fn's other errors, by message
	outcomes tally        // what the sends were answered

	mu      sync.Mutex
	answers []answer // every Claimed and Replay a client got, kept or dropped
}

// answer is a final answer a client got: the attempt its response names.
type answer struct {
	key, attempt string
	outcome      idem.Outcome
}

// newContention makes the store, effect table and hot accounts of one
// configuration, dropped at the end of t.
func newContention(t *testing.T, s contentionSetting, size contentionSize) *contention {
	e := setup(t, s.tg)
	// One connection per client, a few for the lookups that settle lost
	// commits, and all kept open so that the session settings are not
	// sent again and again.
	e.DB.SetMaxOpenConns(size.workers + 4)
	e.DB.SetMaxIdleConns(size.workers + 4)
	c := &contention{t: t, e: e, opts: s.opts, hangUps: s.hangUps, size: size}
	accounts := c.createTable("accounts")
	if s.tg.Name == "vitess" {
		c.fillShards(accounts)
	} else {
		c.fill(accounts, size.accounts)
	}
	ph := e.Dialect.Placeholder
	c.read = fmt.Sprintf("SELECT n FROM %s WHERE id = %s", accounts, ph(1))
	c.update = fmt.Sprintf("UPDATE %s SET n = n + %s WHERE id = %s", accounts, ph(1), ph(2))
	if s.hangUps {
		c.ledger = c.createTable("ledger")
		c.fillLedger(ledgerRows)
	}
	return c
}

// createTable creates a table of (id, n) rows for this run, dropped at the
// end of the test, and returns its name.
func (c *contention) createTable(prefix string) string {
	name := prefix + "_" + dbtest.RandomName()
	if _, err := c.e.DB.Exec("CREATE TABLE " + name + " (id INT PRIMARY KEY, n BIGINT NOT NULL)"); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		if _, err := c.e.DB.Exec("DROP TABLE " + name); err != nil {
			c.t.Logf("drop %s: %v", name, err)
		}
	})
	return name
}

// fill adds rows 0 to rows-1 to table, each with n = 0.
func (c *contention) fill(table string, rows int) {
	values := make([]string, rows)
	for i := range values {
		values[i] = fmt.Sprintf("(%d, 0)", i)
	}
	if _, err := c.e.DB.Exec("INSERT INTO " + table + " (id, n) VALUES " + strings.Join(values, ", ")); err != nil {
		c.t.Fatal(err)
	}
}

// fillShards shards the accounts table of Vitess by id and fills it with
// size.accounts hot accounts on each shard, one row a statement, since
// vtgate refuses a statement on two shards.
func (c *contention) fillShards(table string) {
	dbtest.AddVindex(c.t, c.e.DB, table, "id")
	ctx := context.Background()
	c.shardAccounts = make(map[string][]int)
	for id, full := 0, 0; full < 2; id++ {
		if id == 1000 {
			c.t.Fatalf("1000 ids fill fewer than two shards with %d accounts: %v", c.size.accounts, c.shardAccounts)
		}
		shard, err := dbtest.ShardOf(ctx, c.e.DB, id)
		if err != nil {
			c.t.Fatal(err)
		}
		if len(c.shardAccounts[shard]) == c.size.accounts {
			continue
		}
		if _, err := c.e.DB.Exec(fmt.Sprintf("INSERT INTO %s (id, n) VALUES (%d, 0)", table, id)); err != nil {
			c.t.Fatal(err)
		}
		c.shardAccounts[shard] = append(c.shardAccounts[shard], id)
		if len(c.shardAccounts[shard]) == c.size.accounts {
			full++
		}
	}
}

// fillLedger fills SQLite's ledger in one statement.
func (c *contention) fillLedger(rows int) {
	q := fmt.Sprintf(`WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < %d)
INSERT INTO %s (id, n) SELECT i, 0 FROM r`, rows, c.ledger)
	if _, err := c.e.DB.Exec(q); err != nil {
		c.t.Fatal(err)
	}
}

// run has the clients send requests until the run's bounds say enough, and
// returns how long it issued keys and how long it took in all.
func (c *contention) run() (issuing, total time.Duration) {
	start := time.Now()
	keys := make(chan string)
	var wg sync.WaitGroup
	for range c.size.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range keys {
				c.request(key)
			}
		}()
	}
	for n := 0; !c.enough(n, time.Since(start)); n++ {
		key := fmt.Sprintf("k%d", n)
		c.keys = append(c.keys, key)
		// Up to four clients send the same request at about the same
		// time: the next free clients take the copies.
		for range 1 + rand.N(4) {
			keys <- key
		}
	}
	close(keys)
	issuing = time.Since(start)
	c.winding.Store(true)
	wg.Wait()
	return issuing, time.Since(start)
}

// enough reports whether a run that has issued keys keys in elapsed should
// stop issuing more.
func (c *contention) enough(keys int, elapsed time.Duration) bool {
	switch {
	case keys >= c.size.maxKeys || elapsed >= c.size.maxRun:
		return true
	case elapsed >= c.size.minRun:
		return c.failures.total() >= c.size.minFailures
	}
	return false
}

// request is one client's request for key: it sends it, with the same key
// and hash, until it keeps a final answer. One final answer in four is
// dropped, as if it had been lost on the way, and the client sends again;
// once the run winds down, clients keep their first final answer, so that
// the last keys finish soon.
func (c *contention) request(key string) {
	hash := idem.Fingerprint([]byte("POST /transfers"), []byte(key))
	for send := 1; send <= c.size.maxSends; send++ {
		res, err := c.send(key, hash)
		if c.final(key, res, err) {
			if c.winding.Load() || rand.N(4) != 0 {
				return
			}
			c.outcomes.add("dropped")
		}
		// A jittered pause that grows with the sends, up to 32 ms, as a
		// client's retry policy would.
		time.Sleep(rand.N(time.Millisecond<<min(send, 5)) + time.Millisecond)
	}
	c.t.Errorf("key %s: no final answer after %d sends", key, c.size.maxSends)
}

// send is one send of key, through DoTx or through Do in a transaction
// that the client begins and commits itself, to a handler that swallows
// database errors one time in four.
func (c *contention) send(key string, hash []byte) (idem.Result, error) {
	fn := c.handler(key, rand.N(4) == 0)
	if rand.N(2) == 0 {
		ctx, cancel := c.requestContext()
		defer cancel()
		return c.e.Store.DoTx(ctx, c.e.DB, c.opts, key, hash, fn)
	}
	// The transaction is the application's, begun without the request's
	// context; Do gets the request's, whose clock starts once the
	// transaction has begun, so that a hang-up ends Do's statements rather
	// than the wait for SQLite's write lock.
	tx, err := c.e.DB.BeginTx(context.Background(), c.opts)
	if err != nil {
		return idem.Result{}, err
	}
	defer tx.Rollback()
	ctx, cancel := c.requestContext()
	defer cancel()
	res, err := c.e.Store.Do(ctx, tx, key, hash, fn)
	if err == nil && res.Outcome == idem.Claimed {
		err = tx.Commit()
		// Where the database settles races at commit (TiDB's optimistic
		// mode), the conflicts come here; an application retries them as
		// DoTx does.
		if kind := failureKind(err); kind != "" && c.e.Dialect.Classify(err) == dialect.ErrorRetry {
			c.failures.add(kind + " at commit")
			err = fmt.Errorf("%w: %w", idem.ErrRetry, err)
		}
	}
	return res, err
}

// requestContext is the context of one request. Where clients hang up,
// half of the requests end after a random time between 1 ms and 250 ms,
// spread evenly on a log scale so that some end inside the long write
// however fast or slow the machine is.
func (c *contention) requestContext() (context.Context, context.CancelFunc) {
	if !c.hangUps || rand.N(2) == 0 {
		return context.Background(), func() {}
	}
	const lo, hi = float64(time.Millisecond), float64(250 * time.Millisecond)
	patience := time.Duration(lo * math.Pow(hi/lo, rand.Float64()))
	return context.WithTimeout(context.Background(), patience)
}

// final counts what a send was answered, keeps the response of Claimed and
// Replay for the checks, and reports whether the answer is final.
func (c *contention) final(key string, res idem.Result, err error) bool {
	switch {
	case errors.Is(err, idem.ErrRetry):
		c.outcomes.add("ErrRetry")
		return false
	case err != nil:
		c.outcomes.add("other error")
		return false
	case res.Outcome == idem.Claimed || res.Outcome == idem.Replay:
		c.outcomes.add(res.Outcome.String())
		c.mu.Lock()
		c.answers = append(c.answers, answer{key: key, attempt: attemptOf(res.Response.Body), outcome: res.Outcome})
		c.mu.Unlock()
		return true
	case res.Outcome == idem.Mismatch:
		c.t.Errorf("key %s: Mismatch for a request sent again unchanged", key)
		return true
	}
	c.outcomes.add(res.Outcome.String())
	return false
}

// handler is the application's handler for key. It writes the key's
// effect first, tagged with a new attempt id, then moves money between two
// hot accounts (and, on SQLite, rewrites the ledger), and answers 201
// naming its attempt. A swallowing handler answers a database error with a
// 409 naming its attempt, instead of returning the error. Since the effect
// is written first, a response that commits always commits with its
// attempt's effect.
func (c *contention) handler(key string, swallow bool) idem.Func {
	return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		attempt := fmt.Sprintf("%s.%d", key, c.attempts.Add(1))
		if err := c.work(ctx, tx, key, attempt); err != nil {
			if swallow {
				return idem.Response{Status: 409, Body: []byte("refused " + attempt)}, nil
			}
			return idem.Response{}, err
		}
		return idem.Response{Status: 201, Body: []byte("created " + attempt)}, nil
	}
}

// attemptOf returns the attempt that a handler's response body names.
func attemptOf(body []byte) string {
	_, attempt, _ := strings.Cut(string(body), " ")
	return attempt
}

// work is the handler's writes, stopping at the first error.
func (c *contention) work(ctx context.Context, tx *sql.Tx, key, attempt string) error {
	if err := c.statement(ctx, func() error { return c.e.Effects.Insert(ctx, tx, key, attempt) }); err != nil {
		return err
	}
	if err := c.transfer(ctx, tx, key); err != nil {
		return err
	}
	if c.ledger != "" {
		return c.exec(ctx, tx, "UPDATE "+c.ledger+" SET n = n + 1")
	}
	return nil
}

// transfer moves one unit between two hot accounts picked at random: it
// reads both balances, then updates the two rows, in an order of its own.
// Reading before writing is what snapshot and serializable isolation
// check; the random orders make deadlocks. (Two rows are enough: with
// three, PostgreSQL, which looks for deadlocks only after a transaction
// has waited a second, spends most of a READ COMMITTED run waiting.)
func (c *contention) transfer(ctx context.Context, tx *sql.Tx, key string) error {
	ids := rand.Perm(c.size.accounts)[:2]
	if c.shardAccounts != nil {
		var shard string
		if err := c.statement(ctx, func() (err error) { shard, err = dbtest.ShardOf(ctx, tx, []byte(key)); return err }); err != nil {
			return err
		}
		on := c.shardAccounts[shard]
		ids = []int{on[ids[0]], on[ids[1]]}
	}
	for _, id := range ids {
		var balance int64
		if err := c.statement(ctx, func() error { return tx.QueryRowContext(ctx, c.read, id).Scan(&balance) }); err != nil {
			return err
		}
	}
	from, to := ids[0], ids[1]
	if rand.N(2) == 0 {
		from, to = to, from
	}
	if err := c.exec(ctx, tx, c.update, -1, from); err != nil {
		return err
	}
	return c.exec(ctx, tx, c.update, 1, to)
}

// exec runs one of the handler's writes.
func (c *contention) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	return c.statement(ctx, func() error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	})
}

// statement runs one of the handler's statements and counts the failure it
// met: a retryable failure by kind, anything else by message. A statement
// whose context ended while it ran was interrupted; one whose context had
// ended before was never sent, and is not counted as provoked.
func (c *contention) statement(ctx context.Context, run func() error) error {
	sent := ctx.Err() == nil
	err := run()
	if err == nil {
		return nil
	}
	switch kind := failureKind(err); {
	case kind != "":
		c.failures.add(kind)
	case sent && ctx.Err() != nil:
		c.failures.add("interrupted statement")
	case ctx.Err() != nil:
		c.others.add("not sent: the request had ended")
	default:
		c.others.add(err.Error())
	}
	return err
}

// log prints what the run provoked and what the clients were answered.
func (c *contention) log(issuing, total time.Duration) {
	c.t.Logf("%d keys issued in %v, all answered after %v; fn ran %d times",
		len(c.keys), issuing.Round(time.Millisecond), total.Round(time.Millisecond), c.attempts.Load())
	c.t.Logf("retryable failures provoked in fn or at commit: %v", &c.failures)
	if c.others.total() > 0 {
		c.t.Logf("other errors in fn: %v", &c.others)
	}
	c.t.Logf("answers: %v", &c.outcomes)
	if c.failures.total() == 0 {
		c.t.Errorf("no retryable failure was provoked: this configuration showed nothing")
	}
}

// check verifies the end state of every key, and every final answer that a
// client got, against the effects that committed.
func (c *contention) check() {
	ctx := context.Background()
	effects := c.e.Effects.Notes(c.t) // the attempts of the committed effect rows, by key
	f := findings{t: c.t}
	for _, key := range c.keys {
		committed := effects[key]
		if len(committed) != 1 {
			f.add("keys without exactly one effect", "%s: %d effects %v", key, len(committed), committed)
		}
		res, err := c.e.Store.Lookup(ctx, c.e.DB, key)
		switch {
		case err != nil:
			f.add("keys without a finished record", "%s: Lookup: %v", key, err)
		case res.Outcome != idem.Replay:
			f.add("keys without a finished record", "%s: the record is %v", key, res.Outcome)
		case !slices.Contains(committed, attemptOf(res.Response.Body)):
			f.add("records naming an attempt whose effect was rolled back", "%s: the record says %d %q, committed effects %v",
				key, res.Response.Status, res.Response.Body, committed)
		}
	}
	for _, a := range c.answers {
		if committed := effects[a.key]; !slices.Contains(committed, a.attempt) {
			f.add("answers naming an attempt whose effect was rolled back", "%s: a client got %v naming %s, committed effects %v",
				a.key, a.outcome, a.attempt, committed)
		}
	}
	f.report()
}
