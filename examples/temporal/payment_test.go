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
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/idemgo/idem"
)

// The kill test runs its workers as separate processes: this test binary
// again, with TestWorkerProcess selected and these variables set.
const (
	hostPortEnv  = "TEMPORAL_TEST_HOSTPORT" // the server; set only in a worker process
	namespaceEnv = "TEMPORAL_TEST_NAMESPACE"
	dbPathEnv    = "TEMPORAL_TEST_DB"
	dieEnv       = "TEMPORAL_TEST_DIE_AFTER_COMMIT" // "1": stop for good after the first commit

	// committedLine starts the line that a worker process prints, with
	// the receipt, when a charge has committed and the worker is about
	// to stop for good, before Temporal hears of it.
	committedLine = "committed, dying before the completion: "
	pollingLine   = "worker polling"

	// waitTimeout bounds every wait for the server, a worker process or
	// a workflow. What is waited for takes milliseconds, or one heartbeat
	// timeout (1 s) and one sticky schedule-to-start timeout (1 s) for a
	// retry after a kill, even on a loaded 2-core machine; the bound only
	// turns a run that never gets there into a failure instead of a hang.
	waitTimeout = 2 * time.Minute
)

// newServer starts a Temporal server in the test process, with its state in
// memory, on free loopback ports; it stops at the test's end. Its workers
// (NewWorker) run one activity at a time: an attempt that a loaded machine
// made slower than the heartbeat timeout is retried only once it has
// returned, so that no test sees two attempts of a charge at once.
func newServer(t *testing.T) *temporaltest.TestServer {
	t.Helper()
	return temporaltest.NewServer(temporaltest.WithT(t),
		temporaltest.WithBaseClientOptions(client.Options{Logger: quietLogger()}),
		temporaltest.WithBaseWorkerOptions(worker.Options{MaxConcurrentActivityExecutionSize: 1}))
}

// quietLogger keeps the SDK's per-task log lines out of the test's output.
func quietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}

// newDB makes the payments database in the test's directory, with idem's
// table and the payments table.
func newDB(t *testing.T, opts ...idem.Option) (string, *sql.DB, *idem.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payments.db")
	db, store := openStore(t, path, opts...)
	if err := migrate(context.Background(), db, store); err != nil {
		t.Fatal(err)
	}
	return path, db, store
}

func openStore(t testing.TB, path string, opts ...idem.Option) (*sql.DB, *idem.Store) {
	t.Helper()
	db, err := openDB(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := newStore(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return db, store
}

// registerAll registers the example's workflows and its activity.
func registerAll(r worker.Registry, p *Payments) {
	r.RegisterWorkflow(OrderWorkflow)
	r.RegisterWorkflow(SubscriptionWorkflow)
	r.RegisterActivity(p)
}

// startWorkflow starts wf under id and returns its run.
func startWorkflow(t *testing.T, c client.Client, id string, wf any, arg any) client.WorkflowRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, wf, arg)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// result waits for run's result, following continued runs.
func result(t *testing.T, run client.WorkflowRun, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := run.Get(ctx, out); err != nil {
		t.Fatalf("workflow %s: %v", run.GetID(), err)
	}
}

// payment is a row of the payments table.
type payment struct {
	ID                                 int64
	Key, WorkflowID, RunID, ActivityID string
	AmountCents                        int64
}

func payments(t *testing.T, db *sql.DB) []payment {
	t.Helper()
	rows, err := db.Query(`SELECT id, idem_key, workflow_id, run_id, activity_id, amount_cents FROM payments ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ps []payment
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.ID, &p.Key, &p.WorkflowID, &p.RunID, &p.ActivityID, &p.AmountCents); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ps
}

// keyRecords counts idem's records of key.
func keyRecords(t *testing.T, db *sql.DB, key string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM `+idem.DefaultTable+` WHERE key = ?`, []byte(key)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkFirstAttempt checks the receipt of an activity that no worker lost:
// claimed by its first attempt. An attempt that a loaded machine made
// slower than the heartbeat timeout is retried, and its retry replays; that
// is no failure, and is only logged.
func checkFirstAttempt(t *testing.T, r Receipt) {
	t.Helper()
	switch {
	case r.Attempt == 1 && r.Outcome != "claimed":
		t.Errorf("activity %s, attempt 1: %s, want claimed", r.ActivityID, r.Outcome)
	case r.Attempt > 1 && r.Outcome != "replay":
		t.Errorf("activity %s, attempt %d: %s, want replay", r.ActivityID, r.Attempt, r.Outcome)
	case r.Attempt > 1:
		t.Logf("activity %s was retried (attempt %d, replay): its first attempt outlasted the heartbeat timeout", r.ActivityID, r.Attempt)
	}
}

// TestOrderCompletes runs an order of one instalment on a worker in the
// test process: the workflow completes, with one payment under the
// activity's key.
func TestOrderCompletes(t *testing.T) {
	srv := newServer(t)
	_, db, store := newDB(t)
	srv.NewWorker(taskQueue, func(r worker.Registry) { registerAll(r, &Payments{DB: db, Store: store}) })

	run := startWorkflow(t, srv.GetDefaultClient(), "order-1", OrderWorkflow,
		Order{ID: "order-1", Customer: "acme", Instalments: []int64{4200}})
	var receipts []Receipt
	result(t, run, &receipts)
	if len(receipts) != 1 {
		t.Fatalf("%d receipts, want 1", len(receipts))
	}
	r := receipts[0]
	checkFirstAttempt(t, r)
	if r.WorkflowID != "order-1" || r.RunID != run.GetRunID() {
		t.Errorf("the activity saw workflow %s, run %s; want order-1, %s", r.WorkflowID, r.RunID, run.GetRunID())
	}
	ps := payments(t, db)
	if len(ps) != 1 || ps[0].Key != r.Key || ps[0].ID != r.PaymentID || ps[0].AmountCents != 4200 {
		t.Fatalf("payments %+v, want one of 4200 under %s, payment %d", ps, r.Key, r.PaymentID)
	}
	if n := keyRecords(t, db, r.Key); n != 1 {
		t.Errorf("%d records of the key, want 1", n)
	}
	t.Logf("key %s", r.Key)
}

// TestInstalmentsGetTheirOwnKeys runs an order of two instalments of the
// same amount: the two activities of the one workflow have different
// activity ids, so different keys, and both charges are taken.
func TestInstalmentsGetTheirOwnKeys(t *testing.T) {
	srv := newServer(t)
	_, db, store := newDB(t)
	srv.NewWorker(taskQueue, func(r worker.Registry) { registerAll(r, &Payments{DB: db, Store: store}) })

	run := startWorkflow(t, srv.GetDefaultClient(), "order-2", OrderWorkflow,
		Order{ID: "order-2", Customer: "acme", Instalments: []int64{2500, 2500}})
	var receipts []Receipt
	result(t, run, &receipts)
	if len(receipts) != 2 {
		t.Fatalf("%d receipts, want 2", len(receipts))
	}
	for _, r := range receipts {
		checkFirstAttempt(t, r)
	}
	a, b := receipts[0], receipts[1]
	if a.ActivityID == b.ActivityID || a.Key == b.Key || a.PaymentID == b.PaymentID {
		t.Errorf("the instalments share an activity id, key or payment: %+v and %+v", a, b)
	}
	if ps := payments(t, db); len(ps) != 2 {
		t.Errorf("%d payments, want 2: %+v", len(ps), ps)
	}
	t.Logf("keys %s and %s", a.Key, b.Key)
}

// TestContinueAsNewKeysEachRun bills a subscription of three periods, one
// per run of a workflow that continues as new: the first activity of each
// run has the same activity id, and only the run id, which ActivityKey
// takes in, gives each period's charge a key of its own. There are three
// payments, one per run.
func TestContinueAsNewKeysEachRun(t *testing.T) {
	srv := newServer(t)
	_, db, store := newDB(t)
	srv.NewWorker(taskQueue, func(r worker.Registry) { registerAll(r, &Payments{DB: db, Store: store}) })

	run := startWorkflow(t, srv.GetDefaultClient(), "subscription-acme", SubscriptionWorkflow,
		Subscription{Customer: "acme", AmountCents: 999, Periods: 3})
	var last Receipt
	result(t, run, &last)
	ps := payments(t, db)
	if len(ps) != 3 {
		t.Fatalf("%d payments, want 3: %+v", len(ps), ps)
	}
	runs, keys := map[string]bool{}, map[string]bool{}
	for _, p := range ps {
		if p.WorkflowID != "subscription-acme" || p.ActivityID != ps[0].ActivityID {
			t.Errorf("payment %d: workflow %s, activity %s; want subscription-acme, %s", p.ID, p.WorkflowID, p.ActivityID, ps[0].ActivityID)
		}
		runs[p.RunID], keys[p.Key] = true, true
	}
	if len(runs) != 3 || len(keys) != 3 {
		t.Errorf("the three payments have %d runs and %d keys, want 3 of each", len(runs), len(keys))
	}
	if last.Key != ps[2].Key {
		t.Errorf("the last run's receipt has key %s, its payment %s", last.Key, ps[2].Key)
	}
	t.Logf("activity id %s in each run", ps[0].ActivityID)
}

// TestResetChargesAgain resets a completed order to its first workflow
// task: Temporal starts a new run of the same workflow id, which runs the
// charge again, under a new key (a new run id, and here a new activity id
// too), so the order is charged twice. A reset is an order to do the work
// after its point again.
func TestResetChargesAgain(t *testing.T) {
	srv := newServer(t)
	_, db, store := newDB(t)
	srv.NewWorker(taskQueue, func(r worker.Registry) { registerAll(r, &Payments{DB: db, Store: store}) })
	c := srv.GetDefaultClient()

	run := startWorkflow(t, c, "order-3", OrderWorkflow, Order{ID: "order-3", Customer: "acme", Instalments: []int64{1000}})
	var first []Receipt
	result(t, run, &first)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var taskDone int64
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() && taskDone == 0 {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetEventType() == enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			taskDone = e.GetEventId()
		}
	}
	reset, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 srv.GetDefaultNamespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: run.GetID(), RunId: run.GetRunID()},
		Reason:                    "test",
		WorkflowTaskFinishEventId: taskDone,
		RequestId:                 "reset-order-3",
	})
	if err != nil {
		t.Fatal(err)
	}
	var second []Receipt
	result(t, c.GetWorkflow(ctx, run.GetID(), reset.GetRunId()), &second)

	a, b := first[0], second[0]
	checkFirstAttempt(t, b)
	if b.RunID == a.RunID || b.Key == a.Key {
		t.Errorf("after the reset: run %s, key %s; before: run %s, key %s", b.RunID, b.Key, a.RunID, a.Key)
	}
	if ps := payments(t, db); len(ps) != 2 {
		t.Errorf("%d payments, want 2: %+v", len(ps), ps)
	}
	t.Logf("activity id %s before the reset, %s after", a.ActivityID, b.ActivityID)
}

// TestRetryAfterCommit fails the first attempt of a charge after its
// commit, as if Temporal never heard of it, and checks what the retry
// does: within the Store's retention window it replays the first attempt's
// payment, the only one; once the key has expired (the Store's clock moved
// past keyRetention), it claims the key anew and charges again, which is
// why keyRetention is longer than every retry of a charge.
func TestRetryAfterCommit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		advance  time.Duration // how far the Store's clock moves after the first commit
		outcome  string        // the retry's
		payments int
	}{
		{"within the retention", chargeHorizon, "replay", 1},
		{"after the retention", keyRetention + time.Minute, "claimed", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			var mu sync.Mutex
			var offset time.Duration
			clock := func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				return time.Now().Add(offset)
			}
			_, db, store := newDB(t, idem.WithClock(clock))
			var first Receipt
			p := &Payments{DB: db, Store: store, AfterCommit: func(ctx context.Context, r Receipt) error {
				if r.Attempt != 1 {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				first, offset = r, tc.advance
				return errors.New("the completion is lost")
			}}
			srv.NewWorker(taskQueue, func(r worker.Registry) { registerAll(r, p) })

			run := startWorkflow(t, srv.GetDefaultClient(), "order-5", OrderWorkflow,
				Order{ID: "order-5", Customer: "acme", Instalments: []int64{500}})
			var receipts []Receipt
			result(t, run, &receipts)
			r := receipts[0]
			t.Logf("attempt %d %s payment %d; attempt %d: %s, payment %d", first.Attempt, first.Outcome, first.PaymentID, r.Attempt, r.Outcome, r.PaymentID)
			if r.Key != first.Key || r.Attempt <= first.Attempt || r.Outcome != tc.outcome {
				t.Errorf("the retry: attempt %d, %s, key %s; want a later attempt than %d, %s, key %s", r.Attempt, r.Outcome, r.Key, first.Attempt, tc.outcome, first.Key)
			}
			if ps := payments(t, db); len(ps) != tc.payments {
				t.Errorf("%d payments, want %d: %+v", len(ps), tc.payments, ps)
			}
		})
	}
}

// TestKilledAfterCommit kills a worker process with SIGKILL after its
// charge committed and before Temporal recorded the activity's completion,
// and checks that the retry, on a second worker process, has the same
// workflow id, run id and activity id, so the same key, and answers Replay
// with the first attempt's payment, which is the only one.
func TestKilledAfterCommit(t *testing.T) {
	srv := newServer(t)
	dbPath, db, _ := newDB(t)
	c := srv.GetDefaultClient()

	first := startWorker(t, "first worker", srv, dbPath, true)
	run := startWorkflow(t, c, "order-4", OrderWorkflow, Order{ID: "order-4", Customer: "acme", Instalments: []int64{1999}})
	var committed Receipt
	line := first.waitFor(committedLine)
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, committedLine)), &committed); err != nil {
		t.Fatal(err)
	}
	if ps := payments(t, db); len(ps) != 1 || ps[0].Key != committed.Key {
		t.Fatalf("after the commit: payments %+v, want one under %s", ps, committed.Key)
	}
	first.kill()
	t.Logf("killed the first worker after attempt %d committed payment %d under %s", committed.Attempt, committed.PaymentID, committed.Key)

	second := startWorker(t, "second worker", srv, dbPath, false)
	var receipts []Receipt
	result(t, run, &receipts)
	second.stop()
	if len(receipts) != 1 {
		t.Fatalf("%d receipts, want 1", len(receipts))
	}
	r := receipts[0]
	t.Logf("the second worker ran attempt %d: %s, payment %d", r.Attempt, r.Outcome, r.PaymentID)
	if r.Outcome != "replay" || r.PaymentID != committed.PaymentID {
		t.Errorf("the retry: %s, payment %d; want replay, payment %d", r.Outcome, r.PaymentID, committed.PaymentID)
	}
	if r.Attempt <= committed.Attempt {
		t.Errorf("the retry is attempt %d, the committed one %d", r.Attempt, committed.Attempt)
	}
	if r.WorkflowID != committed.WorkflowID || r.RunID != committed.RunID || r.ActivityID != committed.ActivityID || r.Key != committed.Key {
		t.Errorf("the retry saw %s/%s/%s (key %s), the committed attempt %s/%s/%s (key %s)",
			r.WorkflowID, r.RunID, r.ActivityID, r.Key, committed.WorkflowID, committed.RunID, committed.ActivityID, committed.Key)
	}
	if ps := payments(t, db); len(ps) != 1 {
		t.Errorf("%d payments, want 1: %+v", len(ps), ps)
	}
	if n := keyRecords(t, db, r.Key); n != 1 {
		t.Errorf("%d records of the key, want 1", n)
	}
}

// TestWorkerProcess is a worker process of TestKilledAfterCommit; it is
// skipped unless that test started it. It polls the task queue until it is
// interrupted or killed. With dieEnv set, it runs one activity at a time
// and, after its first charge commits, prints the receipt and waits for its
// SIGKILL: as its one activity slot stays taken, the retry can only go to
// another worker.
func TestWorkerProcess(t *testing.T) {
	hostPort := os.Getenv(hostPortEnv)
	if hostPort == "" {
		t.Skip("a worker process of TestKilledAfterCommit, which starts it")
	}
	db, store := openStore(t, os.Getenv(dbPathEnv))
	p := &Payments{DB: db, Store: store}
	opts := worker.Options{
		// The workflow's next task, after a retry on another worker,
		// leaves this worker's sticky queue after 1 s instead of 5 s.
		StickyScheduleToStartTimeout: time.Second,
	}
	if os.Getenv(dieEnv) == "1" {
		opts.MaxConcurrentActivityExecutionSize = 1
		p.AfterCommit = func(ctx context.Context, r Receipt) error {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Println(committedLine + string(b))
			select {} // until the parent's SIGKILL
		}
	}
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: os.Getenv(namespaceEnv), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, taskQueue, opts)
	registerAll(w, p)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Println(pollingLine)
	<-worker.InterruptCh()
	w.Stop()
}

// workerProcess is a running worker process and the lines it printed.
type workerProcess struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

// startWorker starts a worker process on srv's namespace and dbPath, and
// returns once it polls.
func startWorker(t *testing.T, name string, srv *temporaltest.TestServer, dbPath string, die bool) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.v")
	cmd.Env = append(os.Environ(),
		hostPortEnv+"="+srv.GetFrontendHostPort(),
		namespaceEnv+"="+srv.GetDefaultNamespace(),
		dbPathEnv+"="+dbPath)
	if die {
		cmd.Env = append(cmd.Env, dieEnv+"=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProcess{t: t, name: name, cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	w.waitFor(pollingLine)
	return w
}

// waitFor returns the first line the worker prints that starts with
// prefix.
func (w *workerProcess) waitFor(prefix string) string {
	w.t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case l := <-w.lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-w.done:
			w.t.Fatalf("the %s ended before printing %q", w.name, prefix)
		case <-timeout:
			w.t.Fatalf("the %s did not print %q within %v", w.name, prefix, waitTimeout)
		}
	}
}

// kill kills the worker with SIGKILL, so that nothing of it runs on, and
// waits for it to end.
func (w *workerProcess) kill() {
	w.t.Helper()
	if err := w.cmd.Process.Kill(); err != nil {
		w.t.Fatal(err)
	}
	_ = w.cmd.Wait()
}

// stop interrupts the worker, which stops polling and ends.
func (w *workerProcess) stop() {
	w.t.Helper()
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil {
		w.t.Fatal(err)
	}
	_ = w.cmd.Wait()
}
