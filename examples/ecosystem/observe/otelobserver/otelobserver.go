// Package otelobserver records the calls of idem's Do and DoTx with
// OpenTelemetry metrics.
//
//	observe, err := otelobserver.New(otel.Meter("github.com/idemgo/idem"))
//	...
//	store, err := idem.New(idem.Postgres(), idem.WithObserver(observe))
//
// The instruments are those of package promobserver, named as OpenTelemetry
// names them: dotted, with the unit beside the name rather than in it.
// OpenTelemetry's Prometheus exporter turns them into promobserver's names.
//
//	idem.calls               counter    {call}     outcome, error.type
//	idem.claim_wait          histogram  s          outcome
//	idem.call.duration       histogram  s          outcome
//	idem.call.attempts       histogram  {attempt}
//
// outcome is claimed, replay, mismatch, in_flight or error; error.type,
// present only when outcome is error, is one of retry, too_large, corrupt,
// commit_unknown or other (see package observe), in the attribute that
// OpenTelemetry's conventions name for a low-cardinality error class.
package otelobserver

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/observe"
)

// SecondsBoundaries are the bucket boundaries of the two duration
// histograms. The SDK's default boundaries, 0 to 10000, suit milliseconds
// and would put every claim in the first bucket.
var SecondsBoundaries = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// AttemptsBoundaries are the bucket boundaries of idem.call.attempts: DoTx
// runs at most five transactions.
var AttemptsBoundaries = []float64{1, 2, 3, 4, 5}

// New makes idem's instruments with meter and returns an observer for
// idem.WithObserver that records each call in them.
func New(meter metric.Meter) (func(context.Context, idem.Event), error) {
	if meter == nil {
		return nil, errors.New("otelobserver: nil meter")
	}
	calls, err := meter.Int64Counter("idem.calls",
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls of idem's Do and DoTx, by outcome, and by class of error for outcome=error."))
	if err != nil {
		return nil, err
	}
	wait, err := meter.Float64Histogram("idem.claim_wait",
		metric.WithUnit("s"),
		metric.WithDescription("Time idem's calls spent claiming their key, including waits for another transaction holding it."),
		metric.WithExplicitBucketBoundaries(SecondsBoundaries...))
	if err != nil {
		return nil, err
	}
	duration, err := meter.Float64Histogram("idem.call.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time of idem's calls, the protected work and DoTx's commit included."),
		metric.WithExplicitBucketBoundaries(SecondsBoundaries...))
	if err != nil {
		return nil, err
	}
	attempts, err := meter.Int64Histogram("idem.call.attempts",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Transactions run per call: more than one when DoTx ran again after a conflict."),
		metric.WithExplicitBucketBoundaries(AttemptsBoundaries...))
	if err != nil {
		return nil, err
	}

	// The attribute sets are few and fixed: make each once, rather than on
	// every call.
	byOutcome := map[string]metric.MeasurementOption{}
	for _, o := range observe.Outcomes() {
		byOutcome[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	byError := map[string]metric.MeasurementOption{}
	for _, t := range observe.ErrorTypes() {
		byError[t] = metric.WithAttributeSet(attribute.NewSet(
			attribute.String("outcome", observe.OutcomeError), attribute.String("error.type", t)))
	}

	return func(ctx context.Context, e idem.Event) {
		if e.Kind != idem.EventCall {
			return // a moment of a multi-step request, not a call
		}
		outcome := observe.Outcome(e)
		set := byOutcome[outcome]
		if outcome == observe.OutcomeError {
			calls.Add(ctx, 1, byError[observe.EventErrorType(e)])
		} else {
			calls.Add(ctx, 1, set)
		}
		wait.Record(ctx, e.ClaimWait.Seconds(), set)
		duration.Record(ctx, e.Duration.Seconds(), set)
		attempts.Record(ctx, int64(e.Attempts))
	}, nil
}
