// Command idembench measures what an idempotency key costs: it runs idem's
// paths and the same work without idem side by side, on the same machine in
// one run, and prints the rates and their ratios.
//
//	bash scripts/test -- go -C proving/cmd/idembench run .
//	bash scripts/test -- go -C proving/cmd/idembench run . -db postgres -scenarios claimed,hand,plain,bare -duration 10s -rounds 5
//	bash scripts/test -- go -C proving/cmd/idembench run . -db postgres,mariadb,mysql -scenarios claimed,hand,plain,replay \
//		-drivers pq,pgx,default,interpolate -commits fast,durable -rounds 5
//	bash scripts/test -- go -C proving/cmd/idembench run . -db postgres,mariadb -scenarios http,lease -commits fast,durable -rounds 5
//	bash scripts/test -- go -C proving/cmd/idembench run . -db postgres -drivers pgx-native -scenarios claimed,plain,replay,http,lease \
//		-commits fast,durable -rounds 5
//
// It is a module of its own, so that what it measures with stays out of
// the library's module, and it runs from its directory: go -C proving/cmd/idembench
// from the repository root.
//
// SQLite is always measured (a file in a temporary directory); PostgreSQL,
// MariaDB and MySQL when IDEM_POSTGRES_DSN, IDEM_MARIADB_DSN and
// IDEM_MYSQL_DSN are set, as scripts/test sets them. MariaDB runs with the
// MariaDB dialect, MySQL with the MySQL dialect. Point it only at throwaway
// databases: it creates, fills and drops tables, and -commits durable
// changes the server's settings for the time of the run.
//
// # Paths
//
// Every path runs on tables of its own, made for the measurement, with one
// INSERT into an orders table as the effect (five with effect5, the paths
// then named "... x5"). The scenarios select them:
//
//   - claimed: BEGIN, Store.Do (claim, the effect, completion), COMMIT.
//   - hand: the Store's own statements (Store.Queries), sent by hand.
//   - plain: the design's limit without the library: BEGIN, INSERT ... ON
//     CONFLICT (key) DO NOTHING RETURNING key (INSERT IGNORE on MariaDB and
//     MySQL), the effect, UPDATE of the response, COMMIT, on the Store's
//     table; and "plain replay", its retry of a finished key: BEGIN, the
//     INSERT, a SELECT of the record, ROLLBACK.
//   - bare: the effect alone, BEGIN, INSERT, COMMIT.
//   - replay: the retry of one of 10,000 finished keys through Store.Do.
//   - lookupfirst: DoTx on a store of LookupAlways, new keys and
//     retries, and its statements by hand.
//   - http: an order through idemhttp in its default configuration
//     (idemhttp.New with WithSingleClient), in process, with httptest's
//     request and recorder; and "http replay", the retry of one of 10,000
//     finished orders.
//   - lease: the same order handler behind a middleware built the way
//     lease-based idempotency libraries work (lease.go): the key reserved
//     by an upsert in a statement of its own, then the handler's
//     transaction, which stores the response; and "lease replay".
//
// Under the pgx-native driver setting the same scenarios select idempgx's
// paths on a pgx pool, measured against the plain statements on that pool
// and idem on database/sql with the same driver ("claimed sql", "replay
// sql", "http sql"); native.go lists them.
//
// and these scenarios measure on their own:
//
//   - settings: claimed and replay under every driver setting.
//   - claimstmt: on PostgreSQL, the claim statement alone against the plain
//     INSERT and the steps between them, with one client.
//   - bigtable: claims into a table of 10,000 and of 5,000,000 live keys.
//   - purge: Store.Purge of 1,000,000 expired keys while clients claim.
//
// # Rounds, driver settings and commits
//
// The paths are compared in -rounds rounds. Each round measures every path
// once, under each driver setting of -drivers and each commit mode of
// -commits, in an order rotated from round to round. A table per setting
// and mode gives the median rate of each path with the rate of each round,
// and under it the ratios between paths (claimed / plain, claimed / hand,
// replay / claimed, replay / plain replay, http / lease, http replay / lease
// replay, and on pgx-native claimed / claimed sql, replay / replay sql,
// http / http sql, ...), each the median of the ratios of the rounds, with
// their minimum and maximum: a ratio is always between paths measured in
// the same round, with the same driver, DSN and commit mode.
//
// -drivers names driver settings: pq, pq-binary, pgx, pgx-exec,
// pgx-simple and pgx-native (idempgx on a pgx pool, see above) on
// PostgreSQL; default (the DSN as it is, so database/sql prepares each
// statement) and interpolate (interpolateParams=true) on MariaDB and MySQL;
// sqlite; a setting of one database alone as postgres/pq; main, the
// setting of the main comparison (pgx, interpolate), which is the default;
// or all. A database none of whose settings is named runs its main one.
//
// -commits fast measures the servers as they run (scripts/test starts them
// with commits that do not wait for the disk); durable switches them to
// commits that do, for the measurement, and puts their settings back at the
// end, also when the run fails or is interrupted (commits.go has the
// details). The settings, bigtable and purge scenarios run with the
// server's own commits.
//
// docs/performance.md explains the scenarios and has the figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"
)

var allScenarios = []string{"claimed", "hand", "plain", "bare", "effect5", "replay", "lookupfirst", "http", "lease", "settings", "claimstmt", "bigtable", "purge"}

type config struct {
	duration  time.Duration
	clients   int
	rounds    int
	dbs       []string
	scenarios map[string]bool
	drivers   []string
	commits   []string
	bigRows   int
	smallRows int
	purgeRows int
	batch     int
}

func main() {
	var (
		c                             config
		dbs, scen, drivers, commitArg string
	)
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "how long each measurement runs")
	flag.IntVar(&c.clients, "clients", 16, "concurrent clients")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds of the paths compared (every path once per round, in an order rotated from round to round; the ratios are the median of the rounds' and their spread), and of the big table's")
	flag.StringVar(&dbs, "db", strings.Join(kindNames(), ","), "databases, comma-separated: "+strings.Join(kindNames(), ", "))
	flag.StringVar(&scen, "scenarios", strings.Join(allScenarios, ","), "scenarios, comma-separated: "+strings.Join(allScenarios, ", "))
	flag.StringVar(&drivers, "drivers", "main", "driver settings the paths are compared under, comma-separated: main (pgx on PostgreSQL, interpolate on MariaDB and MySQL), all, "+
		"or settings by key ("+strings.Join(settingKeys(), ", ")+"), or by database and key (postgres/pq); a database none of whose settings is named runs its main one")
	flag.StringVar(&commitArg, "commits", commitFast, "commit modes the paths are compared under, comma-separated: fast (the server as it runs), durable (a flush to disk at every commit, for the run; see the package documentation)")
	flag.IntVar(&c.bigRows, "bigrows", 5_000_000, "live keys in the big table")
	flag.IntVar(&c.smallRows, "smallrows", 10_000, "live keys in the small table the big one is compared with")
	flag.IntVar(&c.purgeRows, "purgerows", 1_000_000, "expired keys to purge")
	flag.IntVar(&c.batch, "batch", 5000, "purge batch")
	flag.Parse()
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "idembench: "+format+"\n", args...)
		os.Exit(2)
	}
	if c.rounds < 1 {
		fail("-rounds %d: want 1 or more", c.rounds)
	}
	c.dbs = strings.Split(dbs, ",")
	for _, name := range c.dbs {
		if lookupKind(name) == nil {
			fail("unknown database %q: want %s", name, strings.Join(kindNames(), ", "))
		}
	}
	c.scenarios = map[string]bool{}
	for _, s := range strings.Split(scen, ",") {
		if !slices.Contains(allScenarios, s) {
			fail("unknown scenario %q: want %s", s, strings.Join(allScenarios, ", "))
		}
		c.scenarios[s] = true
	}
	c.drivers = strings.Split(drivers, ",")
	if err := checkDrivers(c.drivers); err != nil {
		fail("%v", err)
	}
	for _, m := range strings.Split(commitArg, ",") {
		if !slices.Contains(commitModes, m) {
			fail("unknown commit mode %q: want %s", m, strings.Join(commitModes, ", "))
		}
		if !slices.Contains(c.commits, m) {
			c.commits = append(c.commits, m)
		}
	}
	// An interrupt cancels the run, which then puts back the servers'
	// commit settings before it exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintln(os.Stderr, "idembench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	fmt.Printf("idembench: %d clients, %s per measurement, %d round(s), commits %s\n", c.clients, c.duration, c.rounds, strings.Join(c.commits, ", "))
	dir, err := os.MkdirTemp("", "idembench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, name := range c.dbs {
		k := lookupKind(name)
		dsn, ok := k.serverDSN(dir)
		if !ok {
			fmt.Printf("\n## %s: skipped (set %s)\n", name, k.env)
			continue
		}
		main, _ := k.setting(k.main)
		d, _ := k.database(dir, main, commitFast)
		fmt.Printf("\n## %s (%s)\n", k.name, redact(dsn))
		if err := measurePaths(ctx, c, k, dir, k.pick(c.drivers)); err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		if c.scenarios["settings"] && len(k.settings) > 1 {
			var variants []database
			for _, s := range k.settings {
				v, _ := k.database(dir, s, commitFast)
				variants = append(variants, v)
			}
			if err := measureSettings(ctx, c, variants); err != nil {
				return fmt.Errorf("%s settings: %w", k.name, err)
			}
		}
		if c.scenarios["claimstmt"] && k.name == "postgres" {
			for _, s := range k.pick(c.drivers) {
				v, _ := k.database(dir, s, commitFast)
				if v.native {
					// It times statements through database/sql.
					fmt.Printf("\n%s: the claim statement alone is measured under the database/sql settings only\n", v.name)
					continue
				}
				if err := measureClaimStatement(ctx, c, v); err != nil {
					return fmt.Errorf("%s claim statement: %w", v.name, err)
				}
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
