package campaign

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemclient"
	"github.com/idemgo/idem/proving/fault"
)

// Target is a database the campaign runs on.
type Target struct {
	Name    string // as the proving ground names it: sqlite, postgres/pgx, mariadb, …
	Family  string // postgres, mysql or sqlite
	Dialect string // a name of dialects
	Driver  string
	DSN     string // empty for SQLite, whose file each campaign makes
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

// proc is a service process that the campaign supervises.
type proc struct {
	index int
	cfg   ServiceConfig
	bin   string
	log   io.Writer

	mu     sync.Mutex
	cmd    *exec.Cmd
	addr   string // HTTP's
	grpc   string // gRPC's
	paused bool
	done   chan struct{} // closed when cmd has ended
}

// start starts the service and waits until it listens.
func (p *proc) start() error {
	cfg, _ := json.Marshal(p.cfg)
	cmd := exec.Command(p.bin)
	cmd.Env = append(os.Environ(), EnvService+"="+string(cfg))
	cmd.Stderr = p.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	// The service ends when this pipe does (Serve): it is never written,
	// and closes when the service ends or this process dies.
	if _, err := cmd.StdinPipe(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			<-done
			return fmt.Errorf("service %d ended before it listened", p.index)
		}
		httpAddr, grpcAddr, _ := strings.Cut(a, " ")
		p.mu.Lock()
		p.cmd, p.addr, p.grpc, p.done, p.paused = cmd, httpAddr, grpcAddr, done, false
		p.mu.Unlock()
		return nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("service %d did not listen within 60 s", p.index)
	}
}

// base is the service's address as a URL.
func (p *proc) base() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "http://" + p.addr
}

// grpcAddr is the address of the service's gRPC server.
func (p *proc) grpcAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grpc
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
		p.paused = sig == syscall.SIGSTOP
	}
}

// supervise restarts the service whenever it dies, until ctx ends; then
// it kills it.
func (p *proc) supervise(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGKILL)
			<-done
			return
		case <-done:
		}
		for ctx.Err() == nil {
			if err := p.start(); err == nil {
				break
			} else {
				fmt.Fprintf(p.log, "campaign: restart service %d: %v\n", p.index, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
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
	procs []*proc
	http  *http.Client
	idem  *idemclient.Client
}

// Run runs the campaign cfg describes and checks its history.
func Run(ctx context.Context, cfg Config) (Report, error) {
	rep := Report{Target: cfg.Target.Name, Seed: cfg.Seed, Faults: map[string]int{}}
	c := &campaign{cfg: cfg, table: "campaign_" + randomHex(4)}
	c.plan = NewPlan(cfg.Seed, cfg.Clients, cfg.Services, cfg.Duration, cfg.Target.DSN == "", cfg.Target.Driver == "pgx")
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

	c.quiet(ctx)
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
			rep.Faults[e.Fault.Kind]++
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
	var err error
	if c.db, err = sql.Open(tg.Driver, dsn); err != nil {
		return err
	}
	if c.store, err = NewStore(tg.Dialect, c.table); err != nil {
		return err
	}
	if err := c.store.Migrate(ctx, c.db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := createTables(ctx, c.db, tg.Family, tg.Dialect, c.table); err != nil {
		return fmt.Errorf("the campaign's tables: %w", err)
	}
	serviceDSN := dsn
	if tg.DSN != "" {
		addr, err := serverAddr(tg.Family, dsn)
		if err != nil {
			return err
		}
		if c.proxy, err = fault.NewProxy(addr); err != nil {
			return err
		}
		serviceDSN, err = withAddr(tg.Family, dsn, c.proxy.Addr())
		if err != nil {
			return err
		}
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
			DSN: serviceDSN, Table: c.table, Provider: c.prov.url,
		}}
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

// serverAddr returns the host:port of dsn.
func serverAddr(family, dsn string) (string, error) {
	var addr string
	_, err := withAddrFunc(family, dsn, func(a string) string { addr = a; return a })
	return addr, err
}

// withAddr returns dsn with its server's address replaced by addr.
func withAddr(family, dsn, addr string) (string, error) {
	return withAddrFunc(family, dsn, func(string) string { return addr })
}

func withAddrFunc(family, dsn string, f func(string) string) (string, error) {
	switch family {
	case "postgres":
		i := strings.Index(dsn, "@")
		j := strings.Index(dsn[i+1:], "/")
		if i < 0 || j < 0 {
			return "", fmt.Errorf("campaign: a PostgreSQL DSN without user@host:port/: %q", dsn)
		}
		return dsn[:i+1] + f(dsn[i+1:i+1+j]) + dsn[i+1+j:], nil
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return "", err
		}
		cfg.Addr = f(cfg.Addr)
		return cfg.FormatDSN(), nil
	}
	return "", fmt.Errorf("campaign: no server address in a %s DSN", family)
}

// client sends client i's requests, one at a time, until ctx ends, or,
// with MaxOps, until it has sent that many.
func (c *campaign) client(ctx context.Context, i int) {
	for seq := 0; c.more(ctx, seq, c.cfg.MaxOps); seq++ {
		op := c.plan.ClientOp(i, seq)
		if op.Burst {
			twin := op
			twin.Twin, twin.Via = true, (op.Via+1)%len(c.procs)
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.send(ctx, twin)
			}()
			c.send(ctx, op)
			<-done
			continue
		}
		c.send(ctx, op)
		time.Sleep(10 * time.Millisecond)
	}
}

// more reports whether a client goes on to its seq-th operation: until
// ctx ends, or, when MaxOps is set, until it has sent max, whatever the
// time, so that two runs of one seed send the same operations.
func (c *campaign) more(ctx context.Context, seq, max int) bool {
	if c.cfg.MaxOps > 0 {
		return seq < max
	}
	return ctx.Err() == nil
}

// operator takes the operator's actions, one every 50 ms, until ctx ends.
func (c *campaign) operator(ctx context.Context) {
	for seq := 0; c.more(ctx, seq, c.cfg.MaxOps/4); seq++ {
		op := c.plan.OperatorOp(seq)
		if op.Stuck {
			c.pickStuck(ctx, &op)
		}
		c.hist.add(Event{Type: EvInvoke, Op: &op})
		a := c.post(context.WithoutCancel(ctx), c.procs[op.Via].base()+"/operate", op)
		c.hist.add(Event{Type: EvAnswer, Op: &op, Answer: &a})
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pickStuck points op at a request that Store.Unfinished lists, where it
// lists any: the request an operator would look at. An even Pick looks
// among those that no runner holds, whose lease ran out, as an operator
// who follows operations.md does, where there are any; an odd one among
// all, as one who acts in haste.
func (c *campaign) pickStuck(ctx context.Context, op *Op) {
	list, err := c.store.Unfinished(ctx, c.db, 0, 100)
	if err != nil || len(list) == 0 {
		return
	}
	if op.Pick%2 == 0 {
		var out []idem.Unfinished
		for _, u := range list {
			if u.LeaseLeft <= 0 {
				out = append(out, u)
			}
		}
		if len(out) > 0 {
			list = out
		}
	}
	u := list[op.Pick/2%len(list)]
	op.Stored, op.StoredShard = []byte(u.Key), u.Shard.(int64)
}

// send sends op on its surface and records it and its answer. A request
// once sent is seen through to its answer, even when the campaign's time
// is up meanwhile.
func (c *campaign) send(ctx context.Context, op Op) {
	ctx = context.WithoutCancel(ctx)
	c.hist.add(Event{Type: EvInvoke, Op: &op})
	var a Answer
	switch op.Surface {
	case SurfaceHTTP, SurfaceSteps:
		a = c.overHTTP(ctx, op)
	case SurfaceGRPC:
		a = overGRPC(ctx, c.procs[op.Via].grpcAddr(), op)
	default:
		a = c.post(ctx, c.procs[op.Via].base()+"/direct", op)
	}
	c.hist.add(Event{Type: EvAnswer, Op: &op, Answer: &a})
}

// post sends op to url as JSON and decodes its Answer; an answer that
// never came, because the service died or the connection dropped, is
// "lost".
func (c *campaign) post(ctx context.Context, url string, op Op) Answer {
	body, _ := json.Marshal(op)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	defer resp.Body.Close()
	var a Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return Answer{Outcome: "lost", Err: fmt.Sprintf("%s: %v", resp.Status, err)}
	}
	return a
}

// overHTTP sends op through idemclient to the service's idemhttp
// endpoint, and reads the answer as a client would.
func (c *campaign) overHTTP(ctx context.Context, op Op) Answer {
	req := httpRequest(c.procs[op.Via].base(), op).WithContext(ctx)
	resp, err := c.idem.Do(req)
	if err != nil {
		var he *idemclient.Error
		if errors.As(err, &he) {
			return Answer{Outcome: "error", Err: err.Error()}
		}
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	a := Answer{Status: resp.StatusCode, Replayed: resp.Replayed}
	switch {
	case resp.StatusCode == http.StatusUnprocessableEntity:
		a.Outcome = "mismatch"
	case resp.StatusCode == http.StatusConflict:
		a.Outcome = "inflight"
	case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
		a.Outcome = "claimed"
		if resp.Replayed {
			a.Outcome = "replay"
		}
		a.Body = body
		a.Header = http.Header{}
		for _, h := range []string{"Content-Type", "X-Campaign-Inc"} {
			if v, ok := resp.Header[h]; ok {
				a.Header[h] = v
			}
		}
		var b Body
		if json.Unmarshal(body, &b) == nil {
			a.Inc = b.Inc
		}
		if v := resp.Header.Get("X-Campaign-Inc"); v != "" {
			a.Inc, _ = strconv.ParseInt(v, 10, 64)
		}
	default:
		a.Outcome, a.Err = "error", fmt.Sprintf("%s: %s", resp.Status, body)
	}
	return a
}

// faults causes the plan's faults at their times, until ctx ends.
func (c *campaign) faults(ctx context.Context, start time.Time) {
	for _, f := range c.plan.Faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.At))):
		}
		c.hist.add(Event{Type: EvFault, Fault: &f})
		p := c.procs[f.Service]
		switch f.Kind {
		case FaultKill:
			p.signal(syscall.SIGKILL)
		case FaultKillAt:
			c.arm(ctx, p, Arm{KillAt: f.Point})
		case FaultLoseReply:
			c.arm(ctx, p, Arm{LoseReply: true})
		case FaultPause:
			p.signal(syscall.SIGSTOP)
			time.AfterFunc(f.For, func() { p.signal(syscall.SIGCONT) })
		case FaultProvider:
			c.prov.strike(f.Point)
		case FaultCutAll:
			c.proxy.CutAll()
		case FaultCutCommit:
			if f.Point == "before" {
				c.proxy.SetCut(fault.CutBeforeCommit)
			} else {
				c.proxy.SetCut(fault.CutAfterCommit)
			}
		case FaultLatency:
			ms, _ := strconv.Atoi(f.Point)
			c.proxy.SetLatency(time.Duration(ms) * time.Millisecond)
			time.AfterFunc(f.For, func() { c.proxy.SetLatency(0) })
		}
	}
	<-ctx.Done()
}

// arm arms a fault in service p.
func (c *campaign) arm(ctx context.Context, p *proc, a Arm) {
	body, _ := json.Marshal(a)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base()+"/arm", bytes.NewReader(body))
	if err != nil {
		return
	}
	if resp, err := c.http.Do(req); err == nil {
		resp.Body.Close()
	}
}

// quiet stops every fault: paused services go on, the proxy passes
// everything at once, armed faults are taken back, and every service is
// up again.
func (c *campaign) quiet(ctx context.Context) {
	if c.proxy != nil {
		c.proxy.SetLatency(0)
		c.proxy.SetCut(fault.CutNothing)
	}
	for _, p := range c.procs {
		p.signal(syscall.SIGCONT)
	}
	time.Sleep(300 * time.Millisecond) // for the supervisors to restart what died last
	for _, p := range c.procs {
		for range 100 {
			if conn, err := net.Dial("tcp", strings.TrimPrefix(p.base(), "http://")); err == nil {
				conn.Close()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.arm(ctx, p, Arm{Disarm: true})
	}
	c.hist.add(Event{Type: EvQuiet})
}

// drain retries, as the clients' retries would, every request that was
// left without an answer that ends it, until each has one or the
// deadline passes.
func (c *campaign) drain(ctx context.Context, deadline time.Time) {
	// The Resume that a service runs every second takes a checkout left
	// by its client once resumeAge has passed: give it that time first,
	// so that the drain finds what Resume did as well.
	time.Sleep(lease + resumeAge)
	open := openIntentions(c.hist.snapshot())
	seq := 0
	for len(open) > 0 && time.Now().Before(deadline) {
		var still []Op
		for _, op := range open {
			retry := op
			retry.Client, retry.Seq, retry.Via = drainClient, seq, seq%len(c.procs)
			seq++
			if retry.Surface == SurfaceHTTP || retry.Surface == SurfaceSteps {
				retry.Surface = map[string]string{KindPay: SurfaceDoTx, KindCheckout: SurfaceRun}[KindOfKey(op.Key)]
			}
			c.send(ctx, retry)
			if !final(c.lastAnswer(retry)) {
				still = append(still, op)
			}
		}
		open = still
		if len(open) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// drainClient is the client of the drain's retries in the history.
const drainClient = -2

// lastAnswer is the answer that op got.
func (c *campaign) lastAnswer(op Op) Answer {
	events := c.hist.snapshot()
	for i := len(events) - 1; i >= 0; i-- {
		if e := events[i]; e.Type == EvAnswer && e.Op.Client == op.Client && e.Op.Seq == op.Seq {
			return *e.Answer
		}
	}
	return Answer{}
}

// final reports whether a is an answer that ends its request: the
// response, or the refusal of a request that another holds the key for.
func final(a Answer) bool {
	return a.Outcome == "claimed" || a.Outcome == "replay" || a.Outcome == "mismatch"
}

// collect reads what the database holds at the end into the history:
// the effects, the audit and the requests still unfinished.
func (c *campaign) collect(ctx context.Context) error {
	rows, err := c.db.QueryContext(ctx, `SELECT seq, stored_key, shard, inc, phase, op, status, header, body, at FROM `+effectsTable(c.table)+` ORDER BY seq`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var e Effect
		if err := rows.Scan(&e.Seq, &e.Key, &e.Shard, &e.Inc, &e.Phase, &e.Op, &e.Status, &e.Header, &e.Body, &e.At); err != nil {
			rows.Close()
			return err
		}
		c.hist.add(Event{Type: EvEffect, Effect: &e})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if auditable(c.cfg.Target.Dialect) {
		if err := c.collectAudit(ctx); err != nil {
			return err
		}
	}
	unfinished, err := c.store.Unfinished(ctx, c.db, 0, 10000)
	if err != nil {
		return err
	}
	for _, u := range unfinished {
		shard, _ := u.Shard.(int64)
		c.hist.add(Event{Type: EvUnfinished, Unfinished: &Unfinished{Key: []byte(u.Key), Shard: shard, Inc: u.Incarnation, Phase: u.Phase, ResumeIn: u.ResumeIn}})
	}
	return nil
}

func (c *campaign) collectAudit(ctx context.Context) error {
	rows, err := c.db.QueryContext(ctx, `SELECT seq, at, kind, stored_key, shard, old_inc, old_status, old_expires, old_lease, old_phase,
	new_inc, new_status, new_body, new_expires, new_lease, new_phase FROM `+auditTable(c.table)+` ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a AuditRow
		var oldPhase, newPhase []byte
		var oldOK, newOK [4]sql.NullInt64
		if err := rows.Scan(&a.Seq, &a.At, &a.Kind, &a.Key, &a.Shard, &oldOK[0], &oldOK[1], &oldOK[2], &oldOK[3], &oldPhase,
			&newOK[0], &newOK[1], &a.New.Body, &newOK[2], &newOK[3], &newPhase); err != nil {
			return err
		}
		a.Old.Inc, a.Old.Status, a.Old.Expires, a.Old.Lease = nullable(oldOK[0]), nullable(oldOK[1]), nullable(oldOK[2]), nullable(oldOK[3])
		a.New.Inc, a.New.Status, a.New.Expires, a.New.Lease = nullable(newOK[0]), nullable(newOK[1]), nullable(newOK[2]), nullable(newOK[3])
		a.Old.Phase, a.New.Phase = nullableText(oldPhase), nullableText(newPhase)
		c.hist.add(Event{Type: EvAudit, Audit: &a})
	}
	return rows.Err()
}

func nullable(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

func nullableText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
