// Command temporal runs a Temporal workflow whose activity charges an order
// in a SQLite database under idem, so that a charge is taken once however
// often Temporal retries the activity.
//
// The Charge activity's key is ActivityKey: the ids that stay the same
// across the activity's retries. The payment and the key's record commit in
// one transaction; an attempt that committed and then lost its worker is
// retried, and the retry answers with the stored receipt.
//
//	go run .          # a Temporal server in this process, a worker, one order
//
// The server is Temporal's test server (go.temporal.io/server/temporaltest):
// real, with its state in memory, gone when the program ends.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "idem-temporal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := openDB(filepath.Join(dir, "payments.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := newStore()
	if err != nil {
		return err
	}
	if err := migrate(ctx, db, store); err != nil {
		return err
	}

	srv := temporaltest.NewServer()
	defer srv.Stop()
	srv.NewWorker(taskQueue, func(r worker.Registry) {
		r.RegisterWorkflow(OrderWorkflow)
		r.RegisterActivity(&Payments{DB: db, Store: store})
	})
	order := Order{ID: "order-1", Customer: "acme", Instalments: []int64{2500, 2500}}
	wr, err := srv.GetDefaultClient().ExecuteWorkflow(ctx,
		client.StartWorkflowOptions{ID: "order-1", TaskQueue: taskQueue}, OrderWorkflow, order)
	if err != nil {
		return err
	}
	var receipts []Receipt
	if err := wr.Get(ctx, &receipts); err != nil {
		return err
	}
	for _, r := range receipts {
		fmt.Printf("activity %s, attempt %d: %s, payment %d\n  key %s\n", r.ActivityID, r.Attempt, r.Outcome, r.PaymentID, r.Key)
	}
	return nil
}
