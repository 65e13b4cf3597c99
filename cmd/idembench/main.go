// Command idembench measures what an idempotency key costs: it runs idem's
// paths and the same work without idem side by side, on the same machine in
// one run, and prints the rates and their ratios.
//
//	bash scripts/test -- go run ./cmd/idembench
//	bash scripts/test -- go run ./cmd/idembench -db postgres -scenarios claimed,hand,bare -duration 10s
//
// SQLite is always measured (a file in a temporary directory); PostgreSQL,
// MariaDB and MySQL when IDEM_POSTGRES_DSN, IDEM_MARIADB_DSN and
// IDEM_MYSQL_DSN are set, as scripts/test sets them. MariaDB runs with the
// MariaDB dialect, MySQL with the MySQL dialect. Point it only at throwaway
// databases: it creates, fills and drops tables. docs/performance.md explains
// the scenarios and has the figures.
package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
	"github.com/idemgo/idem/internal/dbtest"
)

var allScenarios = []string{"claimed", "hand", "bare", "effect5", "replay", "lookupfirst", "settings", "bigtable", "purge"}

type config struct {
	duration  time.Duration
	clients   int
	rounds    int
	dbs       []string
	scenarios map[string]bool
	bigRows   int
	smallRows int
	purgeRows int
	batch     int
}

func main() {
	var (
		c         config
		dbs, scen string
	)
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "how long each measurement runs")
	flag.IntVar(&c.clients, "clients", 16, "concurrent clients")
	flag.IntVar(&c.rounds, "rounds", 1, "rounds of the claimed, hand, bare and replay runs, and of the big table's, interleaved; the median counts")
	flag.StringVar(&dbs, "db", strings.Join(kindNames(), ","), "databases, comma-separated: "+strings.Join(kindNames(), ", "))
	flag.StringVar(&scen, "scenarios", strings.Join(allScenarios, ","), "scenarios, comma-separated: "+strings.Join(allScenarios, ", "))
	flag.IntVar(&c.bigRows, "bigrows", 5_000_000, "live keys in the big table")
	flag.IntVar(&c.smallRows, "smallrows", 10_000, "live keys in the small table the big one is compared with")
	flag.IntVar(&c.purgeRows, "purgerows", 1_000_000, "expired keys to purge")
	flag.IntVar(&c.batch, "batch", 5000, "purge batch")
	flag.Parse()
	c.dbs = strings.Split(dbs, ",")
	for _, name := range c.dbs {
		if lookupKind(name) == nil {
			fmt.Fprintf(os.Stderr, "idembench: unknown database %q: want %s\n", name, strings.Join(kindNames(), ", "))
			os.Exit(2)
		}
	}
	c.scenarios = map[string]bool{}
	for _, s := range strings.Split(scen, ",") {
		if !slices.Contains(allScenarios, s) {
			fmt.Fprintf(os.Stderr, "idembench: unknown scenario %q\n", s)
			os.Exit(2)
		}
		c.scenarios[s] = true
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(1)
	}
}

// kind is one database that idembench can measure, under its -db name, and
// everything it does differently there.
type kind struct {
	name    string
	dialect idem.Dialect
	// env names the variable that holds the server's DSN. A kind without
	// one is a database file of the run's own, at fileDSN in the run's
	// temporary directory.
	env     string
	fileDSN func(dir string) string
	// main is the driver setting of the main comparison, and settings
	// are those that the settings scenario compares.
	main     setting
	settings []setting
	// orders creates the effect table (%s is its name) and insert adds a row.
	orders, insert string
	// load fills the idem table %s with n live keys (when expires is
	// false) or n expired ones, numbered from 1.
	load func(ctx context.Context, db *sql.DB, table string, n int, expired bool) error
	// conns caps the connections; 0 means one per client. SQLite has one
	// writer at a time, and its clients queue best for one connection in
	// database/sql's pool rather than in its busy handler, which sleeps.
	conns int
	// bigTable is whether the big table scenario runs: on the servers,
	// whose tables outgrow their caches.
	bigTable bool
	// analyze, when set, brings up to date the statistics from which the
	// database tells a table's size (%s is the table).
	analyze string
	// innodb is whether the server counts InnoDB's row lock waits.
	innodb bool
}

// setting is one driver, and a parameter added to the DSN ("" for none).
type setting struct {
	name, driver, param string
}

// The MySQL family shares its table, driver settings and loader.
const (
	mysqlOrders = `CREATE TABLE %s (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARBINARY(512) NOT NULL, item BIGINT NOT NULL, qty INT NOT NULL) ENGINE=InnoDB`
	mysqlInsert = `INSERT INTO %s (k, item, qty) VALUES (?, ?, ?)`
)

func mysqlKind(name string, d idem.Dialect, env string, load func(context.Context, *sql.DB, string, int, bool) error) kind {
	return kind{
		name: name, dialect: d, env: env,
		main: setting{name + " interpolateParams=true", "mysql", "interpolateParams=true"},
		settings: []setting{
			{name + " (default)", "mysql", ""},
			{name + " interpolateParams=true", "mysql", "interpolateParams=true"},
		},
		orders: mysqlOrders, insert: mysqlInsert, load: load,
		bigTable: true,
		// information_schema reports InnoDB's statistics, which ANALYZE
		// brings up to date.
		analyze: "ANALYZE TABLE %s",
		innodb:  true,
	}
}

// kinds are the databases idembench knows, in the order of the default -db.
var kinds = []kind{
	{
		name:    "sqlite",
		dialect: idem.SQLite(),
		fileDSN: func(dir string) string {
			return "file:" + filepath.Join(dir, "idembench.db") +
				"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
		},
		main:   setting{"sqlite", "sqlite", ""},
		orders: `CREATE TABLE %s (id INTEGER PRIMARY KEY, k BLOB NOT NULL, item INTEGER NOT NULL, qty INTEGER NOT NULL)`,
		insert: `INSERT INTO %s (k, item, qty) VALUES (?, ?, ?)`,
		load:   loadSQLite,
		conns:  1,
	},
	{
		name:    "postgres",
		dialect: idem.Postgres(),
		env:     dbtest.EnvPostgres,
		main:    setting{"postgres/pgx", "pgx", ""},
		settings: []setting{
			{"postgres/pq", "postgres", ""},
			{"postgres/pq binary_parameters=yes", "postgres", "binary_parameters=yes"},
			{"postgres/pgx cache_statement (default)", "pgx", ""},
			{"postgres/pgx exec", "pgx", "default_query_exec_mode=exec"},
			{"postgres/pgx simple_protocol", "pgx", "default_query_exec_mode=simple_protocol"},
		},
		orders:   `CREATE TABLE %s (id bigserial PRIMARY KEY, k bytea NOT NULL, item bigint NOT NULL, qty int NOT NULL)`,
		insert:   `INSERT INTO %s (k, item, qty) VALUES ($1, $2, $3)`,
		load:     loadPostgres,
		bigTable: true,
	},
	mysqlKind("mariadb", idem.MariaDB(), dbtest.EnvMariaDB, loadMariaDB),
	mysqlKind("mysql", idem.MySQL(), dbtest.EnvMySQL, loadMySQL),
}

func kindNames() []string {
	var names []string
	for _, k := range kinds {
		names = append(names, k.name)
	}
	return names
}

func lookupKind(name string) *kind {
	for i := range kinds {
		if kinds[i].name == name {
			return &kinds[i]
		}
	}
	return nil
}

// database is one database and driver setting under test.
type database struct {
	*kind
	name   string // of the kind and the setting
	driver string
	dsn    string
}

func run(c config) error {
	ctx := context.Background()
	fmt.Printf("idembench: %d clients, %s per measurement, %d round(s)\n", c.clients, c.duration, c.rounds)
	dir, err := os.MkdirTemp("", "idembench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, name := range c.dbs {
		k := lookupKind(name)
		d, variants, ok := k.databases(dir)
		if !ok {
			fmt.Printf("\n## %s: skipped (set %s)\n", name, k.env)
			continue
		}
		fmt.Printf("\n## %s (%s)\n", d.name, redact(d.dsn))
		if err := measurePaths(ctx, c, d); err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
		if c.scenarios["settings"] && len(variants) > 0 {
			if err := measureSettings(ctx, c, variants); err != nil {
				return fmt.Errorf("%s settings: %w", d.name, err)
			}
		}
		if c.scenarios["bigtable"] && d.bigTable {
			if err := measureBigTable(ctx, c, d); err != nil {
				return fmt.Errorf("%s big table: %w", d.name, err)
			}
		}
		if c.scenarios["purge"] {
			if err := measurePurge(ctx, c, d); err != nil {
				return fmt.Errorf("%s purge: %w", d.name, err)
			}
		}
	}
	return nil
}

func redact(dsn string) string {
	if i := strings.Index(dsn, "idembench"); i >= 0 {
		return "file " + dsn[i:]
	}
	return dsn
}

func withParam(dsn, p string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + p
	}
	return dsn + "?" + p
}

// databases returns the database measured, with the driver setting it uses
// for the main comparison, and the settings to compare; ok is false when
// the server's variable is not set.
func (k *kind) databases(dir string) (main database, settings []database, ok bool) {
	var dsn string
	if k.fileDSN != nil {
		dsn = k.fileDSN(dir)
	} else if dsn = os.Getenv(k.env); dsn == "" {
		return database{}, nil, false
	}
	with := func(s setting) database {
		d := database{kind: k, name: s.name, driver: s.driver, dsn: dsn}
		if s.param != "" {
			d.dsn = withParam(dsn, s.param)
		}
		return d
	}
	for _, s := range k.settings {
		settings = append(settings, with(s))
	}
	return with(k.main), settings, true
}

// bench is one database opened with a store and an orders table of their
// own, dropped by close.
type bench struct {
	d     database
	db    *sql.DB
	store *idem.Store
	// lookupFirst is a store on the same table made WithLookupFirst.
	lookupFirst *idem.Store
	table       string
	orders      string
	insert      string
	queries     map[string]idem.Query
}

func open(ctx context.Context, d database, clients int, wrap func(driver.Driver, string) driver.Connector) (*bench, error) {
	db, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		db = sql.OpenDB(wrap(db.Driver(), d.dsn))
	}
	conns := clients + 4
	if d.conns > 0 {
		conns = d.conns
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	var suffix [5]byte
	binary.BigEndian.PutUint32(suffix[:], rand.Uint32())
	id := hex.EncodeToString(suffix[:4])
	b := &bench{d: d, db: db, table: "idembench_" + id, orders: "orders_" + id}
	b.store, err = idem.New(d.dialect, idem.WithTable(b.table))
	if err != nil {
		db.Close()
		return nil, err
	}
	b.lookupFirst, err = idem.New(d.dialect, idem.WithTable(b.table), idem.WithLookupFirst())
	if err != nil {
		db.Close()
		return nil, err
	}
	b.queries = b.store.Queries()
	b.insert = strings.ReplaceAll(d.insert, "%s", b.orders)
	if err := b.store.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.ExecContext(ctx, strings.ReplaceAll(d.orders, "%s", b.orders)); err != nil {
		b.close()
		return nil, err
	}
	// Open every connection before measuring.
	var held []*sql.Conn
	for range min(clients, conns) {
		cn, err := db.Conn(ctx)
		if err != nil {
			b.close()
			return nil, err
		}
		held = append(held, cn)
	}
	for _, cn := range held {
		cn.Close()
	}
	return b, nil
}

func (b *bench) close() {
	for _, t := range []string{b.table, b.orders} {
		_, _ = b.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+t)
	}
	b.db.Close()
}

// The request every path handles: a fixed request hash, and the response
// that the work answers.
var (
	reqHash  = sha256.Sum256([]byte(`POST /orders {"item":42,"qty":1}`))
	response = idem.Response{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"order":"accepted"}`),
	}
)

// newKey returns a random key shaped like a UUID, 36 bytes.
func newKey(r *rand.Rand) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], r.Uint64())
	binary.BigEndian.PutUint64(b[8:], r.Uint64())
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// effect inserts n order rows for key.
func (b *bench) effect(ctx context.Context, tx *sql.Tx, key []byte, n int) error {
	for i := range n {
		if _, err := tx.ExecContext(ctx, b.insert, key, int64(42+i), int64(1)); err != nil {
			return err
		}
	}
	return nil
}

// claimed runs one request through idem: BEGIN, Do (claim, the effect,
// completion), COMMIT. claimLat, when set, gets the time the claim took.
func (b *bench) claimed(ctx context.Context, key string, n int, claimLat *time.Duration) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	start := time.Now()
	res, err := b.store.Do(ctx, tx, key, reqHash[:], func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if claimLat != nil {
			*claimLat = time.Since(start)
		}
		return response, b.effect(ctx, tx, []byte(key), n)
	})
	if err != nil {
		return err
	}
	if res.Outcome != idem.Claimed {
		return fmt.Errorf("outcome %v, want claimed", res.Outcome)
	}
	return tx.Commit()
}

// replay asks again for a key that finished: BEGIN, Do, ROLLBACK.
func (b *bench) replay(ctx context.Context, key string) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := b.store.Do(ctx, tx, key, reqHash[:], func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{}, errors.New("the work ran on a replay")
	})
	if err != nil {
		return err
	}
	if res.Outcome != idem.Replay {
		return fmt.Errorf("outcome %v, want replay", res.Outcome)
	}
	return nil
}

// lookupFirstDoTx runs one request through DoTx on the store made
// WithLookupFirst and expects want: for Claimed, the lookup, then BEGIN,
// claim, the effect, completion, COMMIT; for Replay, the lookup alone.
func (b *bench) lookupFirstDoTx(ctx context.Context, key string, want idem.Outcome) error {
	res, err := b.lookupFirst.DoTx(ctx, b.db, nil, key, reqHash[:], func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if want != idem.Claimed {
			return idem.Response{}, errors.New("the work ran on a replay")
		}
		return response, b.effect(ctx, tx, []byte(key), 1)
	})
	if err == nil && res.Outcome != want {
		err = fmt.Errorf("outcome %v, want %v", res.Outcome, want)
	}
	return err
}

// bare is the effect without idem: BEGIN, the effect, COMMIT.
func (b *bench) bare(ctx context.Context, key string, n int) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := b.effect(ctx, tx, []byte(key), n); err != nil {
		return err
	}
	return tx.Commit()
}

// hand sends idem's claim and completion statements, copied from
// Store.Queries, by hand: BEGIN, claim, the effect, completion, COMMIT. It
// binds the arguments directly and stores the same record, so that the
// difference to claimed is what Do itself costs. Where the dialect claims in
// several statements (set_lock_wait, claim_write, claim, reset_lock_wait),
// it sends them all, in the Store's order.
//
// With lookupFirst it reads the key first, as a store made WithLookupFirst
// does, and expects no record.
func (b *bench) hand(ctx context.Context, key string, n int, token int64, lookupFirst bool) error {
	k := []byte(key)
	if lookupFirst {
		var hash []byte
		err := b.db.QueryRowContext(ctx, b.queries["lookup"].SQL, k).Scan(&hash)
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("lookup: %v, want no row", err)
		}
	}
	now := time.Now().UnixMicro()
	arg := func(name string) any {
		switch name {
		case "key":
			return k
		case "request_hash":
			return reqHash[:]
		case "created_at":
			return now
		case "expires_at":
			return now + (24 * time.Hour).Microseconds()
		case "token":
			return token
		case "lock_id":
			sum := sha256.Sum256(k)
			return int64(binary.BigEndian.Uint64(sum[:8]))
		}
		return nil
	}
	bind := func(q idem.Query) []any {
		args := make([]any, len(q.Params))
		for i, p := range q.Params {
			args[i] = arg(p)
		}
		return args
	}
	exec := func(tx *sql.Tx, name string) error {
		q, ok := b.queries[name]
		if !ok {
			return nil
		}
		if _, err := tx.ExecContext(ctx, q.SQL, bind(q)...); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	claim, complete := b.queries["claim"], b.queries["complete"]
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var (
		won, busy                    bool
		hash, header, body, sum      []byte
		status, createdAt, expiresAt sql.NullInt64
		owner                        sql.NullInt64
	)
	if err := exec(tx, "set_lock_wait"); err != nil {
		return err
	}
	if err := exec(tx, "claim_write"); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, claim.SQL, bind(claim)...).Scan(&won, &busy, &hash, &status, &header, &body, &sum, &createdAt, &expiresAt, &owner); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if err := exec(tx, "reset_lock_wait"); err != nil {
		return err
	}
	if !won {
		return errors.New("claim lost")
	}
	if err := b.effect(ctx, tx, k, n); err != nil {
		return err
	}
	header = codec.EncodeHeader(response.Header)
	cs := codec.Checksum(k, reqHash[:], int64(response.Status), header, response.Body)
	var args []any
	for _, p := range complete.Params {
		switch p {
		case "status":
			args = append(args, int64(response.Status))
		case "header":
			args = append(args, header)
		case "body":
			args = append(args, response.Body)
		case "checksum":
			args = append(args, cs[:])
		default:
			args = append(args, arg(p))
		}
	}
	r, err := tx.ExecContext(ctx, complete.SQL, args...)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v", n, err)
	}
	return tx.Commit()
}

// result is what one measurement counted.
type result struct {
	ops      int64
	elapsed  time.Duration
	lat      []time.Duration // per operation, sorted
	extraLat []time.Duration // a second latency per operation, sorted, when measured
}

func (r result) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	i := int(float64(len(lat)-1) * p)
	return lat[i]
}

// op is one operation of a worker; extra, when set, is a second latency to
// record (the claim's, within the operation).
type op func(ctx context.Context, r *rand.Rand, extra *time.Duration) error

// measure runs op from clients workers for d, after a warm-up of d/10, and
// stops at the first error.
func measure(ctx context.Context, clients int, d time.Duration, o op) (result, error) {
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		counting atomic.Bool
		mu       sync.Mutex
		res      result
		firstErr error
	)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(rand.Uint64(), uint64(w)))
			var lat, extra []time.Duration
			for !stop.Load() {
				var x time.Duration
				start := time.Now()
				if err := o(ctx, r, &x); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					stop.Store(true)
					return
				}
				if counting.Load() {
					lat = append(lat, time.Since(start))
					if x > 0 {
						extra = append(extra, x)
					}
				}
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.extraLat = append(res.extraLat, extra...)
			mu.Unlock()
		}()
	}
	time.Sleep(d / 10)
	counting.Store(true)
	start := time.Now()
	time.Sleep(d)
	counting.Store(false)
	res.elapsed = time.Since(start)
	stop.Store(true)
	wg.Wait()
	res.ops = int64(len(res.lat))
	slices.Sort(res.lat)
	slices.Sort(res.extraLat)
	return res, firstErr
}

// measurePaths runs the claimed, hand-written, bare and replay paths, with
// one and with five INSERTs of effect, round by round, on fresh tables.
func measurePaths(ctx context.Context, c config, d database) error {
	type run struct {
		name string
		do   func(b *bench, token *atomic.Int64) op
	}
	keyed := func(f func(b *bench, ctx context.Context, key string, token int64) error) func(*bench, *atomic.Int64) op {
		return func(b *bench, token *atomic.Int64) op {
			return func(ctx context.Context, r *rand.Rand, _ *time.Duration) error {
				return f(b, ctx, newKey(r), token.Add(1))
			}
		}
	}
	var runs []run
	for _, n := range []int{1, 5} {
		if n == 5 && !c.scenarios["effect5"] {
			continue
		}
		suffix := ""
		if n == 5 {
			suffix = " x5"
		}
		if c.scenarios["bare"] {
			runs = append(runs, run{"bare" + suffix, keyed(func(b *bench, ctx context.Context, key string, _ int64) error {
				return b.bare(ctx, key, n)
			})})
		}
		if c.scenarios["hand"] {
			runs = append(runs, run{"hand" + suffix, keyed(func(b *bench, ctx context.Context, key string, tok int64) error {
				return b.hand(ctx, key, n, tok, false)
			})})
		}
		if c.scenarios["claimed"] {
			runs = append(runs, run{"claimed" + suffix, keyed(func(b *bench, ctx context.Context, key string, _ int64) error {
				return b.claimed(ctx, key, n, nil)
			})})
		}
	}
	if c.scenarios["lookupfirst"] {
		runs = append(runs, run{"hand lookup-first", keyed(func(b *bench, ctx context.Context, key string, tok int64) error {
			return b.hand(ctx, key, 1, tok, true)
		})})
		runs = append(runs, run{"claimed lookup-first", keyed(func(b *bench, ctx context.Context, key string, _ int64) error {
			return b.lookupFirstDoTx(ctx, key, idem.Claimed)
		})})
	}
	replays := map[string]func(*bench, context.Context, string) error{}
	if c.scenarios["replay"] {
		replays["replay"] = (*bench).replay
	}
	if c.scenarios["lookupfirst"] {
		replays["replay lookup-first"] = func(b *bench, ctx context.Context, key string) error {
			return b.lookupFirstDoTx(ctx, key, idem.Replay)
		}
	}
	replayNames := slices.Sorted(maps.Keys(replays))
	rates := map[string][]float64{}
	last := map[string]result{}
	for range c.rounds {
		for _, r := range runs {
			b, err := open(ctx, d, c.clients, nil)
			if err != nil {
				return err
			}
			var token atomic.Int64
			token.Store(rand.Int64N(1 << 40))
			res, err := measure(ctx, c.clients, c.duration, r.do(b, &token))
			b.close()
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			rates[r.name] = append(rates[r.name], res.rate())
			last[r.name] = res
		}
		for _, name := range replayNames {
			res, err := measureReplay(ctx, c, d, replays[name])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			rates[name] = append(rates[name], res.rate())
			last[name] = res
		}
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.name)
	}
	names = append(names, replayNames...)
	if len(names) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\trequests/s (median)\trounds\tp50\tp99\t")
	median := map[string]float64{}
	for _, n := range names {
		median[n] = med(rates[n])
		res := last[n]
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t\n", n, median[n], fmtRates(rates[n]), ms(pct(res.lat, 0.5)), ms(pct(res.lat, 0.99)))
	}
	tw.Flush()
	ratio := func(label, a, b string) {
		if median[a] > 0 && median[b] > 0 {
			fmt.Printf("  %-34s %.3f\n", label, median[a]/median[b])
		}
	}
	ratio("claimed / hand-written", "claimed", "hand")
	ratio("claimed / bare", "claimed", "bare")
	ratio("claimed x5 / hand-written x5", "claimed x5", "hand x5")
	ratio("claimed x5 / bare x5", "claimed x5", "bare x5")
	ratio("replay / claimed", "replay", "claimed")
	ratio("claimed l-f / hand-written l-f", "claimed lookup-first", "hand lookup-first")
	ratio("claimed lookup-first / claimed", "claimed lookup-first", "claimed")
	ratio("replay lookup-first / replay", "replay lookup-first", "replay")
	ratio("replay lookup-first / claimed l-f", "replay lookup-first", "claimed lookup-first")
	return nil
}

// measureReplay claims replayKeys keys, then replays them at random with
// replay.
func measureReplay(ctx context.Context, c config, d database, replay func(*bench, context.Context, string) error) (result, error) {
	const replayKeys = 10000
	b, err := open(ctx, d, c.clients, nil)
	if err != nil {
		return result{}, err
	}
	defer b.close()
	keys := make([]string, replayKeys)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range keys {
		keys[i] = newKey(r)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, c.clients)
	for range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= replayKeys {
					return
				}
				if err := b.claimed(ctx, keys[i], 1, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return result{}, err
	}
	return measure(ctx, c.clients, c.duration, func(ctx context.Context, r *rand.Rand, _ *time.Duration) error {
		return replay(b, ctx, keys[r.IntN(replayKeys)])
	})
}

// measureSettings compares the claimed and replay paths under each driver
// setting.
func measureSettings(ctx context.Context, c config, variants []database) error {
	fmt.Println("\ndriver settings:")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "driver and setting\tclaimed/s\tp50\treplay/s\tp50\t")
	for _, v := range variants {
		b, err := open(ctx, v, c.clients, nil)
		if err != nil {
			return err
		}
		cl, err := measure(ctx, c.clients, c.duration, func(ctx context.Context, r *rand.Rand, _ *time.Duration) error {
			return b.claimed(ctx, newKey(r), 1, nil)
		})
		b.close()
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		rp, err := measureReplay(ctx, c, v, (*bench).replay)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%s\t\n", v.name, cl.rate(), ms(pct(cl.lat, 0.5)), rp.rate(), ms(pct(rp.lat, 0.5)))
	}
	return tw.Flush()
}

// measureBigTable compares claims into a table of smallRows live keys with
// claims into one of bigRows. Both tables are loaded first; the rounds then
// alternate between them, and the median claim p50 of each counts.
func measureBigTable(ctx context.Context, c config, d database) error {
	fmt.Printf("\nbig table (claimed path, %d clients, %d round(s)):\n", c.clients, c.rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "live keys\tload\ttable and indexes\trequests/s\tclaim p50 (median)\trounds\tclaim p99\trequest p50\trequest p99\t")
	sizes := []int{c.smallRows, c.bigRows}
	benches := make([]*bench, len(sizes))
	loads := make([]time.Duration, len(sizes))
	tables := make([]int64, len(sizes))
	defer func() {
		for _, b := range benches {
			if b != nil {
				b.close()
			}
		}
	}()
	for i, n := range sizes {
		b, err := open(ctx, d, c.clients, nil)
		if err != nil {
			return err
		}
		benches[i] = b
		start := time.Now()
		if err := d.load(ctx, b.db, b.table, n, false); err != nil {
			return fmt.Errorf("load %d: %w", n, err)
		}
		loads[i] = time.Since(start)
		if tables[i], err = b.tableMB(ctx); err != nil {
			return fmt.Errorf("table size: %w", err)
		}
	}
	p50s := make([][]float64, len(sizes))
	last := make([]result, len(sizes))
	for range c.rounds {
		for i, b := range benches {
			res, err := measure(ctx, c.clients, c.duration, func(ctx context.Context, r *rand.Rand, claim *time.Duration) error {
				return b.claimed(ctx, newKey(r), 1, claim)
			})
			if err != nil {
				return err
			}
			p50s[i] = append(p50s[i], float64(pct(res.extraLat, 0.5).Microseconds()))
			last[i] = res
		}
	}
	for i, n := range sizes {
		res := last[i]
		fmt.Fprintf(tw, "%d\t%s\t%d MB\t%.0f\t%s\t%s µs\t%s\t%s\t%s\t\n", n, loads[i].Round(time.Second), tables[i], res.rate(),
			ms(time.Duration(med(p50s[i]))*time.Microsecond), fmtRates(p50s[i]), ms(pct(res.extraLat, 0.99)), ms(pct(res.lat, 0.5)), ms(pct(res.lat, 0.99)))
	}
	tw.Flush()
	if small := med(p50s[0]); small > 0 {
		fmt.Printf("  %-34s %.3f\n", "claim p50, big / small", med(p50s[1])/small)
	}
	return nil
}

// tableMB returns the size of the idem table with its indexes, in MB.
func (b *bench) tableMB(ctx context.Context) (int64, error) {
	ins, ok := b.d.dialect.(idem.TableInspector)
	if !ok {
		return 0, fmt.Errorf("the %s dialect does not implement idem.TableInspector", b.d.dialect.Name())
	}
	if b.d.analyze != "" {
		if _, err := b.db.ExecContext(ctx, fmt.Sprintf(b.d.analyze, b.table)); err != nil {
			return 0, err
		}
	}
	size, _, err := ins.TableSize(ctx, b.db, b.table)
	return size >> 20, err
}

// measurePurge purges purgeRows expired keys in batches while paced clients
// claim new keys, and compares their claim latency with a run without purge.
func measurePurge(ctx context.Context, c config, d database) error {
	const (
		claimers = 4
		pace     = 20 * time.Millisecond // per claimer: 200 claims/s in all
	)
	var batches batchTimes
	b, err := open(ctx, d, c.clients, func(base driver.Driver, dsn string) driver.Connector {
		return &timingConnector{base: base, dsn: dsn, t: &batches}
	})
	if err != nil {
		return err
	}
	defer b.close()
	batches.sql = b.queries["purge"].SQL
	start := time.Now()
	if err := d.load(ctx, b.db, b.table, c.purgeRows, true); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	load := time.Since(start)

	// claims runs paced claimers until stop, and returns the latencies of
	// their claims and of their whole requests (BEGIN to COMMIT, the wait
	// for a connection included), sorted.
	claims := func(stop <-chan struct{}) (claim, req []time.Duration, err error) {
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		for w := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(rand.Uint64(), uint64(w)))
				tick := time.NewTicker(pace)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					var cl time.Duration
					start := time.Now()
					cerr := b.claimed(ctx, newKey(r), 1, &cl)
					took := time.Since(start)
					mu.Lock()
					if cerr != nil {
						err = cerr
						mu.Unlock()
						return
					}
					claim, req = append(claim, cl), append(req, took)
					mu.Unlock()
				}
			}()
		}
		<-stop
		wg.Wait()
		slices.Sort(claim)
		slices.Sort(req)
		return claim, req, err
	}

	// Claims alone.
	stop := make(chan struct{})
	time.AfterFunc(2*time.Second, func() { close(stop) })
	quietClaim, quietReq, err := claims(stop)
	if err != nil {
		return err
	}
	// Claims during the purge.
	stop = make(chan struct{})
	var (
		busyClaim, busyReq []time.Duration
		cerr               error
		done               = make(chan struct{})
	)
	waitsBefore, err := rowLockWaits(ctx, b)
	if err != nil {
		return err
	}
	go func() {
		busyClaim, busyReq, cerr = claims(stop)
		close(done)
	}()
	start = time.Now()
	n, err := b.store.Purge(ctx, b.db, c.batch)
	took := time.Since(start)
	close(stop)
	<-done
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	waitsAfter, err := rowLockWaits(ctx, b)
	if err != nil {
		return err
	}
	bt := batches.sorted()
	fmt.Printf("\npurge (%d expired keys loaded in %s, batch %d, %d paced claimers):\n", c.purgeRows, load.Round(time.Second), c.batch, claimers)
	fmt.Printf("  purged %d in %s: %.0f rows/s, %d batches, batch p50 %s, longest %s\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), len(bt), ms(pct(bt, 0.5)), ms(pct(bt, 1)))
	show := func(label string, lat []time.Duration) {
		fmt.Printf("  %-30s n=%d p50 %s p99 %s max %s\n", label, len(lat), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)), ms(pct(lat, 1)))
	}
	show("claim, without purge:", quietClaim)
	show("claim, during purge:", busyClaim)
	show("request, without purge:", quietReq)
	show("request, during purge:", busyReq)
	if waitsAfter != nil {
		fmt.Printf("  row lock waits during the purge: %d, %d ms in all (Innodb_row_lock_waits, Innodb_row_lock_time)\n",
			waitsAfter[0]-waitsBefore[0], waitsAfter[1]-waitsBefore[1])
	}
	return nil
}

// rowLockWaits returns InnoDB's counts of row lock waits and of the
// milliseconds spent in them, for the whole server; nil elsewhere.
func rowLockWaits(ctx context.Context, b *bench) ([]int64, error) {
	if !b.d.innodb {
		return nil, nil
	}
	counts := make([]int64, 2)
	for i, name := range []string{"Innodb_row_lock_waits", "Innodb_row_lock_time"} {
		var n string
		if err := b.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &counts[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return counts, nil
}

// batchTimes collects how long each purge statement took.
type batchTimes struct {
	sql string
	mu  sync.Mutex
	d   []time.Duration
}

func (t *batchTimes) sorted() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := slices.Clone(t.d)
	slices.Sort(d)
	return d
}

type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

// timingConnector times the purge statements its connections run.
type timingConnector struct {
	base driver.Driver
	dsn  string
	t    *batchTimes
}

func (c *timingConnector) Connect(context.Context) (driver.Conn, error) {
	cn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	fc, ok := cn.(fullConn)
	if !ok {
		cn.Close()
		return nil, fmt.Errorf("driver %T lacks context methods", cn)
	}
	return &timingConn{fc, c.t}, nil
}

func (c *timingConnector) Driver() driver.Driver { return c.base }

type timingConn struct {
	fullConn
	t *batchTimes
}

func (c *timingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if query != c.t.sql {
		return c.fullConn.ExecContext(ctx, query, args)
	}
	start := time.Now()
	r, err := c.fullConn.ExecContext(ctx, query, args)
	if err == nil {
		c.t.mu.Lock()
		c.t.d = append(c.t.d, time.Since(start))
		c.t.mu.Unlock()
	}
	return r, err
}

// Loading rows: the keys are the hex MD5 of a number, 32 bytes that look
// random, like the UUIDs real clients send. Live rows expire a day from
// now; expired rows expired long ago.
func times(expired bool) (created, expires int64) {
	now := time.Now().UnixMicro()
	if expired {
		return 1, 2
	}
	return now, now + (24 * time.Hour).Microseconds()
}

const loadChunk = 500_000

func loadPostgres(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	for lo := 1; lo <= n; lo += loadChunk {
		hi := min(n, lo+loadChunk-1)
		q := fmt.Sprintf(`INSERT INTO %s (key, request_hash, created_at, expires_at, status, header, body, checksum)
SELECT convert_to(md5(i::text), 'UTF8'), '\x00'::bytea, %d, %d + i, 201, '\x'::bytea, '\x7b7d'::bytea, '\x00'::bytea
FROM generate_series(%d, %d) AS i`, `"`+table+`"`, created, expires, lo, hi)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE "`+table+`"`); err != nil {
		return err
	}
	// Write the load out now, so that the measurement that follows does
	// not share the machine with a checkpoint of a gigabyte of pages, as a
	// table that has grown over a day would not. It needs a superuser or
	// pg_checkpoint, as the DSN of scripts/test has.
	_, err := db.ExecContext(ctx, `CHECKPOINT`)
	return err
}

// loadMariaDB inserts the rows in the order of their keys, in one
// statement: InnoDB clusters rows by primary key, and random-order inserts
// into a table larger than the buffer pool would spend their time on random
// page reads.
func loadMariaDB(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	q := fmt.Sprintf("INSERT INTO `%s` (`key`, request_hash, token, created_at, expires_at, status, header, body, checksum) "+
		"SELECT MD5(seq) AS k, 0x00, seq, %d, %d + seq, 201, '', '{}', 0x00 FROM seq_1_to_%d ORDER BY k", table, created, expires, n)
	if _, err := db.ExecContext(ctx, q); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "ANALYZE TABLE `"+table+"`")
	return err
}

// loadMySQL is loadMariaDB for MySQL, which has no sequence tables: a
// recursive CTE counts instead, on a connection allowed to recurse n deep.
// Its keys are the first 32 hex digits of SHA-256, as the server used here
// has no MD5, and look the same.
func loadMySQL(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION cte_max_recursion_depth = %d", n+1)); err != nil {
		return err
	}
	q := fmt.Sprintf("INSERT INTO `%s` (`key`, request_hash, token, created_at, expires_at, status, header, body, checksum) "+
		"WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < %d) "+
		"SELECT LEFT(SHA2(i, 256), 32) AS k, 0x00, i, %d, %d + i, 201, '', '{}', 0x00 FROM seq ORDER BY k", table, n, created, expires)
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "ANALYZE TABLE `"+table+"`")
	return err
}

func loadSQLite(ctx context.Context, db *sql.DB, table string, n int, expired bool) error {
	created, expires := times(expired)
	for lo := 1; lo <= n; lo += loadChunk {
		hi := min(n, lo+loadChunk-1)
		q := fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM s WHERE i < %d)
INSERT INTO "%s" (key, request_hash, created_at, expires_at, status, header, body, checksum)
SELECT CAST(hex(randomblob(16)) AS BLOB), x'00', %d, %d + i, 201, x'', x'7b7d', x'00' FROM s`, lo, hi, table, created, expires)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func fmtRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
