package main

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// taskQueue is the queue of the example's workflows and activities.
const taskQueue = "payments"

// chargeHorizon bounds the time from a charge's scheduling to its last
// attempt (the activity's ScheduleToCloseTimeout): past it, Temporal gives
// up on the activity and the workflow fails.
const chargeHorizon = 24 * time.Hour

// keyRetention is the Store's retention window (idem.WithRetention). A key
// is claimed by an attempt, after the activity was scheduled, so a window
// longer than chargeHorizon outlives every retry of the charge: a retry
// after the key expired would claim it anew and charge again
// (TestRetryAfterCommit). The hour more allows for clocks of workers and
// Temporal's server that disagree.
const keyRetention = chargeHorizon + time.Hour

// chargeOptions are the Charge activity's options. The heartbeat timeout
// is how soon Temporal gives up on an attempt whose worker stopped
// answering and schedules the retry: 1 s here, so that the kill test sees
// the retry within seconds; an activity that takes longer heartbeats more
// often than that, and a service sizes it to its slowest attempt. Charge
// does not heartbeat, so it is an upper bound on an attempt too; one that
// a loaded machine makes slower is retried, and the retry replays. The
// attempts are not counted, only bounded in time by chargeHorizon: a
// charge that committed must be reported, and one that did not must run.
var chargeOptions = workflow.ActivityOptions{
	ScheduleToCloseTimeout: chargeHorizon,
	StartToCloseTimeout:    time.Minute,
	HeartbeatTimeout:       time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    100 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    5 * time.Second,
	},
}

// Order is the input of OrderWorkflow: an order paid in instalments.
type Order struct {
	ID          string
	Customer    string
	Instalments []int64 // the amount of each, in cents
}

// OrderWorkflow charges each instalment of an order with an activity of
// its own. Two instalments of the same amount are two charges: their
// activities have different activity ids, so different keys.
func OrderWorkflow(ctx workflow.Context, o Order) ([]Receipt, error) {
	ctx = workflow.WithActivityOptions(ctx, chargeOptions)
	var p *Payments
	receipts := make([]Receipt, 0, len(o.Instalments))
	for _, amount := range o.Instalments {
		var r Receipt
		c := Charge{OrderID: o.ID, Customer: o.Customer, AmountCents: amount}
		if err := workflow.ExecuteActivity(ctx, p.Charge, c).Get(ctx, &r); err != nil {
			return nil, err
		}
		receipts = append(receipts, r)
	}
	return receipts, nil
}

// Subscription is the input of SubscriptionWorkflow: a customer billed
// the same amount each period, Periods times in all, of which Billed are
// done.
type Subscription struct {
	Customer    string
	AmountCents int64
	Periods     int
	Billed      int
}

// SubscriptionWorkflow bills one period per run and continues as new for
// the next, as a long-lived workflow does to keep its history short. Each
// run's charge is the first activity of its run, with the same activity
// id: only the run id tells them apart (see ActivityKey).
func SubscriptionWorkflow(ctx workflow.Context, s Subscription) (Receipt, error) {
	ctx = workflow.WithActivityOptions(ctx, chargeOptions)
	var p *Payments
	var r Receipt
	c := Charge{OrderID: s.Customer + " subscription", Customer: s.Customer, AmountCents: s.AmountCents}
	if err := workflow.ExecuteActivity(ctx, p.Charge, c).Get(ctx, &r); err != nil {
		return Receipt{}, err
	}
	s.Billed++
	if s.Billed < s.Periods {
		return Receipt{}, workflow.NewContinueAsNewError(ctx, SubscriptionWorkflow, s)
	}
	return r, nil
}
