package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgo/idem"
)

// The tests run the consumer as separate processes: this test binary again,
// with TestConsumerProcess selected and these variables set.
const (
	natsURLEnv = "CONSUMER_TEST_NATS_URL" // the broker; set only in a consumer process
	dbPathEnv  = "CONSUMER_TEST_DB"
	dieEnv     = "CONSUMER_TEST_DIE_BEFORE_ACK" // the id of the message whose ack never leaves

	dyingMessage = "committed, dying before the ack"

	// A short ack wait and duplicate window, so that redeliveries and
	// JetStream's forgetting of an id come within seconds.
	testAckWait   = 2 * time.Second
	testDupWindow = time.Second

	// waitTimeout bounds every wait for a consumer process or the broker.
	// What is waited for takes milliseconds, or one ack wait (2 s) for a
	// redelivery, or one duplicate window (1 s), even on a loaded 2-core
	// machine under -race; the bound only turns a process that never gets
	// there into a failure instead of a hang.
	waitTimeout = 60 * time.Second
)

// TestKilledBeforeAck kills a consumer with SIGKILL after its transaction
// committed and before its ack, and checks that the broker's redelivery to
// the next consumer is answered Replay and acked, and that every message
// placed exactly one order.
func TestKilledBeforeAck(t *testing.T) {
	b := startBroker(t)
	dbPath := filepath.Join(t.TempDir(), "orders.db")
	ids := []string{"order-1", "order-2", "order-3", "order-4", "order-5"}
	for i, id := range ids {
		if ack := b.publish(t, id, orderJSON("acme", fmt.Sprintf("item %d", i+1), i+1)); ack.Duplicate {
			t.Fatalf("%s: taken for a duplicate", id)
		}
	}

	const doomed = "order-3"
	first := startConsumer(t, "first consumer", b, dbPath, doomed)
	dying := first.waitFor("the commit of "+doomed, func(e event) bool { return e.Msg == dyingMessage && e.ID == doomed })
	db := openTestDB(t, dbPath)
	if n := countOrders(t, db, doomed); n != 1 {
		t.Fatalf("%s is committed but has %d orders, want 1", doomed, n)
	}
	first.kill()
	info, err := b.cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the first consumer after committing %s (%s), before its ack; %d messages await an ack", doomed, dying.Response, info.NumAckPending)
	if info.NumAckPending == 0 {
		t.Errorf("no message awaits an ack: %s was acked", doomed)
	}

	second := startConsumer(t, "second consumer", b, dbPath, "")
	again := second.waitFor("the redelivery of "+doomed, func(e event) bool { return e.ID == doomed && e.Action != "" })
	t.Logf("the second consumer got %s at delivery %d: %s, %s, %s", doomed, again.Delivered, again.Outcome, again.Action, again.Response)
	if again.Outcome != "replay" || again.Action != "ack" {
		t.Errorf("the redelivery of %s: %s and %s, want replay and ack", doomed, again.Outcome, again.Action)
	}
	if again.Delivered < 2 {
		t.Errorf("the redelivery of %s is delivery %d, want 2 or more", doomed, again.Delivered)
	}
	if again.Response != dying.Response {
		t.Errorf("the replay answered %s, the first delivery %s", again.Response, dying.Response)
	}
	for _, id := range []string{"order-4", "order-5"} { // never reached by the first consumer
		second.waitFor("the delivery of "+id, func(e event) bool { return e.ID == id && e.Action == "ack" })
	}
	b.waitAllAcked(t)
	second.stop()

	for _, id := range ids {
		if n := countOrders(t, db, id); n != 1 {
			t.Errorf("%s placed %d orders, want 1", id, n)
		}
	}
	if n := countOrders(t, db, ""); n != len(ids) {
		t.Errorf("%d orders, want %d", n, len(ids))
	}
	claims := map[string]int{}
	for _, e := range append(first.events(), second.events()...) {
		if e.Outcome == "claimed" {
			claims[e.ID]++
		}
		if e.ID == doomed && e.Outcome != "" && e.Outcome != "claimed" && e.Outcome != "replay" {
			t.Errorf("a delivery of %s was answered %s", doomed, e.Outcome)
		}
	}
	for _, id := range ids {
		if claims[id] != 1 {
			t.Errorf("%s was claimed %d times over both consumers, want once", id, claims[id])
		}
	}
}

// TestPoisonedMessages publishes an id again with another payload, once
// within JetStream's duplicate window (the broker drops it) and once after
// it (the consumer gets it, idem answers Mismatch, and the consumer terms
// it); a publisher's retry after the window, which idem answers Replay; and
// messages without an id or an order, which are termed too. Only the two
// first orders are placed.
func TestPoisonedMessages(t *testing.T) {
	b := startBroker(t)
	dbPath := filepath.Join(t.TempDir(), "orders.db")
	p := startConsumer(t, "consumer", b, dbPath, "")

	book := orderJSON("acme", "book", 1)
	kettle := orderJSON("acme", "kettle", 1)
	lamp := orderJSON("globex", "lamp", 2)

	start := time.Now()
	first := b.publish(t, "order-7", book)
	reused := b.publish(t, "order-7", kettle)
	if elapsed := time.Since(start); elapsed < testDupWindow {
		// The server saw both publications less than elapsed apart, so
		// the second fell within its window. It compares ids, not
		// payloads: a different order under the same id is dropped.
		if !reused.Duplicate || reused.Sequence != first.Sequence {
			t.Errorf("publishing order-7 again within the window: duplicate %v, sequence %d; want a duplicate of %d", reused.Duplicate, reused.Sequence, first.Sequence)
		}
		t.Logf("order-7 with another payload, %v after the first: JetStream dropped it as a duplicate of message %d", elapsed, reused.Sequence)
	} else {
		t.Logf("the two publications took %v, longer than the duplicate window: not checking JetStream's deduplication", elapsed)
	}
	retried := b.publish(t, "order-8", lamp)
	for _, a := range []*jetstream.PubAck{first, retried} {
		e := p.waitFor(fmt.Sprintf("message %d", a.Sequence), handled(a))
		if e.Outcome != "claimed" || e.Action != "ack" {
			t.Fatalf("%s: %s and %s, want claimed and ack", e.ID, e.Outcome, e.Action)
		}
	}

	late := b.publishAfterWindow(t, "order-7", kettle)
	e := p.waitFor("order-7 with another payload, after the window", handled(late))
	t.Logf("order-7 with another payload, after the window: %s, %s: %s", e.Outcome, e.Action, e.Msg)
	if e.Outcome != "mismatch" || e.Action != "term" {
		t.Errorf("order-7 with another payload: %s and %s, want mismatch and term", e.Outcome, e.Action)
	}

	lateRetry := b.publishAfterWindow(t, "order-8", lamp)
	e = p.waitFor("order-8's late retry", handled(lateRetry))
	t.Logf("order-8's retry, after the window: %s, %s: %s", e.Outcome, e.Action, e.Response)
	if e.Outcome != "replay" || e.Action != "ack" {
		t.Errorf("order-8's late retry: %s and %s, want replay and ack", e.Outcome, e.Action)
	}

	noID, err := b.js.Publish(context.Background(), subject, book)
	if err != nil {
		t.Fatal(err)
	}
	notAnOrder := b.publish(t, "order-9", []byte(`{"customer":"acme"}`))
	for _, a := range []*jetstream.PubAck{noID, notAnOrder} {
		e := p.waitFor(fmt.Sprintf("message %d", a.Sequence), handled(a))
		t.Logf("message %d: %s", a.Sequence, e.Msg)
		if e.Action != "term" {
			t.Errorf("message %d: %s, want term", a.Sequence, e.Action)
		}
	}
	b.waitAllAcked(t)
	p.stop()

	db := openTestDB(t, dbPath)
	var item string
	if err := db.QueryRow(`SELECT item FROM orders WHERE message_id = 'order-7'`).Scan(&item); err != nil || item != "book" {
		t.Errorf("order-7's order: %q, %v; want the book", item, err)
	}
	for id, want := range map[string]int{"order-7": 1, "order-8": 1, "": 2} {
		if n := countOrders(t, db, id); n != want {
			t.Errorf("%q: %d orders, want %d", id, n, want)
		}
	}
}

// TestSettle checks what the consumer tells the broker for each answer of
// DoTx.
func TestSettle(t *testing.T) {
	for _, c := range []struct {
		name string
		res  idem.Result
		err  error
		want action
	}{
		{"claimed", idem.Result{Outcome: idem.Claimed}, nil, ack},
		{"replay", idem.Result{Outcome: idem.Replay}, nil, ack},
		{"mismatch", idem.Result{Outcome: idem.Mismatch}, nil, term},
		{"in flight", idem.Result{Outcome: idem.InFlight}, nil, nak},
		{"database error", idem.Result{}, errors.New("disk I/O error"), nak},
		{"conflicts", idem.Result{}, fmt.Errorf("%w: busy", idem.ErrRetry), nak},
		{"commit unknown", idem.Result{}, idem.ErrCommitUnknown, nak},
		{"key too long", idem.Result{}, fmt.Errorf("%w: too long", idem.ErrInvalidKey), term},
		{"not an order", idem.Result{}, fmt.Errorf("%w: no item", errBadMessage), term},
	} {
		if got := settle(c.res, c.err).action; got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestConsumerProcess is a consumer process of the tests above; it does
// nothing in a normal run. It consumes until SIGTERM, logging each message
// as a JSON line on stdout for the parent to read. With dieEnv set, it
// stops for good after committing that message, before its ack.
func TestConsumerProcess(t *testing.T) {
	url := os.Getenv(natsURLEnv)
	if url == "" {
		t.Skip("a consumer process of TestKilledBeforeAck and TestPoisonedMessages")
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	cfg := consumerConfig{
		NATSURL:    url,
		DBPath:     os.Getenv(dbPathEnv),
		Log:        logger,
		AckWait:    testAckWait,
		RetryDelay: 100 * time.Millisecond,
	}
	if doomed := os.Getenv(dieEnv); doomed != "" {
		cfg.BeforeAck = func(id string, res idem.Result, err error) {
			if id == doomed && err == nil && res.Outcome == idem.Claimed {
				logger.Info(dyingMessage, "id", id, "outcome", "claimed", "response", string(res.Response.Body))
				select {} // until the parent's SIGKILL
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := consume(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// broker is a NATS server with JetStream in this process, with the stream
// and the durable consumer in place.
type broker struct {
	url  string
	js   jetstream.JetStream
	cons jetstream.Consumer
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	ns, err := startServer("127.0.0.1", -1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := newStreamConfig()
	cfg.Duplicates = testDupWindow
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// The consumer processes make the same durable consumer; making it
	// here lets the test read its state from the start.
	cons, err := js.CreateOrUpdateConsumer(ctx, streamName, newConsumerConfig(testAckWait))
	if err != nil {
		t.Fatal(err)
	}
	return &broker{url: ns.ClientURL(), js: js, cons: cons}
}

func (b *broker) publish(t *testing.T, id string, payload []byte) *jetstream.PubAck {
	t.Helper()
	ack, err := publish(context.Background(), b.js, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

// publishAfterWindow publishes until JetStream stops taking the id for a
// duplicate (a duplicate is dropped, so the tries store nothing). The server
// forgets ids on a timer of its own once the window has passed, so the test
// asks rather than guesses when.
func (b *broker) publishAfterWindow(t *testing.T, id string, payload []byte) *jetstream.PubAck {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ack := b.publish(t, id, payload)
		if !ack.Duplicate {
			return ack
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still a duplicate after %v", id, waitTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAllAcked waits until the durable consumer has no message left to
// deliver and none awaiting its ack.
func (b *broker) waitAllAcked(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		info, err := b.cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d messages undelivered, %d unacked", waitTimeout, info.NumPending, info.NumAckPending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// event is a line that a consumer process logged.
type event struct {
	Msg       string `json:"msg"`
	ID        string `json:"id"`
	Seq       uint64 `json:"seq"`
	Delivered uint64 `json:"delivered"`
	Outcome   string `json:"outcome"`
	Action    string `json:"action"`
	Response  string `json:"response"`
}

// handled matches the log line about the stored message that the publish
// ack a names.
func handled(a *jetstream.PubAck) func(event) bool {
	return func(e event) bool { return e.Seq == a.Sequence && e.Action != "" }
}

// consumerProcess is a consumer running in a process of its own.
type consumerProcess struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stderr strings.Builder // read after Wait
	lines  chan string     // stdout, closed at its end
	done   bool

	mu   sync.Mutex
	seen []event
	raw  []string
}

func startConsumer(t *testing.T, name string, b *broker, dbPath, dieBeforeAckOf string) *consumerProcess {
	t.Helper()
	p := &consumerProcess{t: t, name: name, lines: make(chan string, 1024)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestConsumerProcess$", "-test.v")
	p.cmd.Env = append(os.Environ(), natsURLEnv+"="+b.url, dbPathEnv+"="+dbPath, dieEnv+"="+dieBeforeAckOf)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(p.kill)
	return p
}

// waitFor reads the process's log until a line matches, and returns it.
func (p *consumerProcess) waitFor(what string, match func(event) bool) event {
	p.t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.kill()
				p.t.Fatalf("the %s ended before %s:\n%s", p.name, what, p.output())
			}
			var e event
			if json.Unmarshal([]byte(line), &e) != nil {
				e = event{} // the test framework's own lines
			}
			p.mu.Lock()
			p.raw = append(p.raw, line)
			if e.Msg != "" {
				p.seen = append(p.seen, e)
			}
			p.mu.Unlock()
			if e.Msg != "" && match(e) {
				return e
			}
		case <-timeout:
			p.kill()
			p.t.Fatalf("the %s did not get to %s within %v:\n%s", p.name, what, waitTimeout, p.output())
		}
	}
}

// events returns the lines read so far.
func (p *consumerProcess) events() []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event(nil), p.seen...)
}

// kill sends SIGKILL: no deferred function of the process runs, no ack or
// rollback is sent.
func (p *consumerProcess) kill() {
	if p.done {
		return
	}
	_ = p.cmd.Process.Kill()
	p.reap()
}

// stop asks the process to stop, as Ctrl-C would, and checks that it did.
func (p *consumerProcess) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		p.reap()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(waitTimeout):
		_ = p.cmd.Process.Kill()
		<-exited
		p.t.Fatalf("the %s did not stop on SIGTERM:\n%s", p.name, p.output())
	}
	if !p.cmd.ProcessState.Success() {
		p.t.Errorf("the %s: %v\n%s", p.name, p.cmd.ProcessState, p.output())
	}
}

// reap reads the rest of stdout and waits for the process to end.
func (p *consumerProcess) reap() {
	for line := range p.lines {
		p.mu.Lock()
		p.raw = append(p.raw, line)
		var e event
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg != "" {
			p.seen = append(p.seen, e)
		}
		p.mu.Unlock()
	}
	_ = p.cmd.Wait()
	p.done = true
}

// output is what the process printed, for failure messages; stderr only once
// it has ended.
func (p *consumerProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.Join(p.raw, "\n")
	if p.done {
		s += "\n" + p.stderr.String()
	}
	return s
}

func orderJSON(customer, item string, quantity int) []byte {
	b, err := json.Marshal(order{Customer: customer, Item: item, Quantity: quantity})
	if err != nil {
		panic(err)
	}
	return b
}

func openTestDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := openDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// countOrders counts the orders that message id placed, or all orders if
// id is empty.
func countOrders(t *testing.T, db *sql.DB, id string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM orders WHERE ? = '' OR message_id = ?`, id, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
