package campaign

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemclient"
	"github.com/idemgo/idem/internal/placement"
	"github.com/idemgo/idem/proving/fault"
)

// Target is a database the campaign runs on.
type Target struct {
	Name    string // as the proving ground names it: sqlite, postgres/pgx, mariadb, …
	Family  string // postgres, mysql or sqlite
	Dialect string // a name of dialects
	Driver  string
	DSN     string // empty for SQLite, whose file each campaign makes
	// Control is the control of the database server, where the campaign
	// may kill it (EnvServerControl).
	Control string
}

// Config is one campaign on one target.
type Config struct {
	Target   Target
	Duration time.Duration
	Seed     uint64
	Clients  int
	Services int
	// Service is the program that runs the services: by default this
	// one; a mutation's build otherwise.
	Service string
	// Dir is where the campaign keeps its history and its SQLite file.
	Dir string
	// MaxOps, when positive, stops each client after that many
	// operations, for a run whose operations a test compares.
	MaxOps int
	// Faults, when set, are the faults to cause, by kind and point,
	// instead of the usual mix: a mutation's (Mutation.Faults).
	Faults []Fault
	Log    io.Writer
}

// Report is what a campaign on one target found.
type Report struct {
	Target     string
	Ops        int
	Faults     map[string]int
	Violations []Violation
	Seed       uint64
	History    string
}

// Line is the report's last line, as scripts/campaign prints it.
func (r Report) Line() string {
	kinds := make([]string, 0, len(r.Faults))
	n := 0
	for _, k := range sortedKeys(r.Faults) {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, r.Faults[k]))
		n += r.Faults[k]
	}
	return fmt.Sprintf("campaign: %s %d operations, %d faults (%s), %d violations, seed %d",
		r.Target, r.Ops, n, strings.Join(kinds, ", "), len(r.Violations), r.Seed)
}

// campaign is one campaign in progress.
type campaign struct {
	cfg   Config
	plan  Plan
	hist  *history
	db    *sql.DB
	store *idem.Store
	table string
	proxy *fault.Proxy
	prov  *provider
	srv   *dbServer // nil where the campaign kills no server
	// sharded says that the tables are in Vitess's VSchema.
	sharded bool
	procs   []*proc
	http    *http.Client
	idem    *idemclient.Client
	// arming counts the arms of faults that are on their way to services.
	arming sync.WaitGroup
}

// Run runs the campaign cfg describes and checks its history.
func Run(ctx context.Context, cfg Config) (Report, error) {
	rep := Report{Target: cfg.Target.Name, Seed: cfg.Seed, Faults: map[string]int{}}
	c := &campaign{cfg: cfg, table: "campaign_" + randomHex(4)}
	c.plan = NewPlan(cfg.Seed, cfg.Clients, cfg.Services, cfg.Duration, cfg.Target, cfg.Faults)
	var err error
	rep.History = filepath.Join(cfg.Dir, strings.ReplaceAll(cfg.Target.Name, "/", "-")+".history.jsonl")
	if c.hist, err = newHistory(rep.History); err != nil {
		return rep, err
	}
	defer c.hist.close()
	if err := c.setUp(ctx); err != nil {
		return rep, err
	}
	defer c.tearDown()

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Add(1)
		go p.supervise(runCtx, &wg)
	}
	start := time.Now()
	clientsCtx, stopClients := context.WithTimeout(runCtx, cfg.Duration)
	var clients sync.WaitGroup
	for i := range cfg.Clients {
		clients.Add(1)
		go func() {
			defer clients.Done()
			c.client(clientsCtx, i)
		}()
	}
	clients.Add(1)
	go func() {
		defer clients.Done()
		c.operator(clientsCtx)
	}()
	c.faults(clientsCtx, start)
	clients.Wait()
	stopClients()

	if err := c.quiet(ctx); err != nil {
		stop()
		wg.Wait()
		return rep, err
	}
	deadline := time.Now().Add(drainBound)
	c.drain(ctx, deadline)
	err = c.collect(ctx)
	stop()
	wg.Wait()
	if err != nil {
		return rep, err
	}
	events := c.hist.snapshot()
	for _, e := range events {
		switch e.Type {
		case EvInvoke:
			rep.Ops++
		case EvFault:
			// A server kill counts once it struck: the point that a
			// service was armed for may not have come.
			if e.Fault.Kind != FaultServerKill {
				rep.Faults[e.Fault.Kind]++
			}
		case EvServer:
			if e.Server.Killed {
				rep.Faults[FaultServerKill]++
			}
		}
	}
	rep.Violations = Check(events, auditable(cfg.Target.Dialect))
	return rep, nil
}

// drainBound is how long after the faults stop every request must have
// reached its end: a lease, a lock wait rounded up to a second and then
// some, the age at which Resume takes a request and its period, and time
// for a loaded machine.
const drainBound = lease + 2*time.Second + resumeAge + time.Second + 20*time.Second

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// setUp makes the tables, the proxy, the provider and the services.
func (c *campaign) setUp(ctx context.Context) error {
	tg := c.cfg.Target
	dsn := tg.DSN
	if dsn == "" {
		dsn = "file:" + filepath.Join(c.cfg.Dir, c.table+".db") + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	}
	quietDriver()
	var err error
	if c.db, err = sql.Open(tg.Driver, dsn); err != nil {
		return err
	}
	if c.store, err = newStore(tg.Dialect, c.table); err != nil {
		return err
	}
	if err := c.store.Migrate(ctx, c.db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := createTables(ctx, c.db, tg.Family, tg.Dialect, c.table); err != nil {
		return fmt.Errorf("the campaign's tables: %w", err)
	}
	if placement.Sharded(dialects[tg.Dialect]) {
		// Each table on the shard of its records' shard values, as
		// docs/scaling.md tells an operator to put them.
		c.sharded = true
		for table, column := range map[string]string{c.table: "shard_key", effectsTable(c.table): "shard"} {
			if err := placement.ShardTable(ctx, c.db, table, column); err != nil {
				return err
			}
		}
	}
	serviceDSN := dsn
	if tg.DSN != "" {
		var proxyErr error
		serviceDSN, err = fault.Through(tg.Family, dsn, func(target string) string {
			if c.proxy, proxyErr = fault.NewProxy(target); proxyErr != nil {
				return target
			}
			return c.proxy.Addr()
		})
		if err = errors.Join(err, proxyErr); err != nil {
			return err
		}
	}
	if tg.Control != "" {
		c.srv = &dbServer{dir: tg.Control, record: c.hist.add}
	}
	c.prov, err = startProvider(func(call Call) { c.hist.add(Event{Type: EvCall, Call: &call}) })
	if err != nil {
		return err
	}
	c.http = &http.Client{Timeout: 30 * time.Second}
	if c.idem, err = idemclient.New(idemclient.WithHTTPClient(c.http), idemclient.WithMaxAttempts(3),
		idemclient.WithBackoff(50*time.Millisecond, 500*time.Millisecond), idemclient.WithMaxElapsed(10*time.Second)); err != nil {
		return err
	}
	bin := c.cfg.Service
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	for i := range c.cfg.Services {
		p := &proc{index: i, bin: bin, log: c.cfg.Log, cfg: ServiceConfig{
			Index: i, Dialect: tg.Dialect, Family: tg.Family, Driver: tg.Driver,
			DSN: serviceDSN, Table: c.table, Provider: c.prov.url, Server: tg.Control,
		}, serverKilled: c.serverKilled}
		if err := p.start(); err != nil {
			return err
		}
		c.procs = append(c.procs, p)
	}
	return nil
}

// tearDown drops what setUp made on the server; a SQLite file goes with
// the campaign's directory.
func (c *campaign) tearDown() {
	for _, p := range c.procs {
		p.mu.Lock()
		cmd, done := p.cmd, p.done
		p.mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-done
		}
	}
	if c.prov != nil {
		c.prov.close()
	}
	if c.proxy != nil {
		c.proxy.Close()
	}
	if c.db == nil {
		return
	}
	ctx := context.Background()
	if c.sharded {
		for _, t := range []string{c.table, effectsTable(c.table)} {
			_ = placement.UnshardTable(ctx, c.db, t)
		}
	}
	if c.cfg.Target.Family == "postgres" {
		_, _ = c.db.ExecContext(ctx, "DROP FUNCTION IF EXISTS "+c.table+"_audit_fn() CASCADE")
	}
	for _, t := range []string{c.table, effectsTable(c.table), auditTable(c.table)} {
		_, _ = c.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t)
	}
	if c.cfg.Target.Dialect == "mysql" {
		for _, p := range []string{"_claim", "_claim2"} {
			_, _ = c.db.ExecContext(ctx, "DROP PROCEDURE IF EXISTS "+c.table+p)
		}
	}
	c.db.Close()
}
