// Package promobserver exports the calls of idem's Do and DoTx as
// Prometheus metrics.
//
//	metrics, err := promobserver.New(prometheus.DefaultRegisterer)
//	...
//	store, err := idem.New(idem.Postgres(), idem.WithObserver(metrics.Observe))
//
// The metrics, with the questions they answer:
//
//	idem_calls_total{outcome, error_type}       how often do clients retry (replay),
//	                                            reuse keys (mismatch), or fail (error)?
//	idem_claim_wait_seconds{outcome}            how long do requests queue behind
//	                                            another holding their key?
//	idem_call_duration_seconds{outcome}         what does a protected call cost, work
//	                                            and commit included?
//	idem_call_attempts                          how often does DoTx run a transaction
//	                                            again after a conflict?
//
// outcome is claimed, replay, mismatch, in_flight or error, and error_type
// is empty unless outcome is error, then one of retry, too_large, corrupt,
// commit_unknown or other (see package observe). The names are those that
// OpenTelemetry's Prometheus exporter gives the instruments of package
// otelobserver, so dashboards work with either.
package promobserver

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/observe"
)

// SecondsBuckets are the bucket bounds of the two duration histograms, in
// seconds. A claim that nobody holds takes well under a millisecond, and
// one that waits for another request waits up to the lock timeout, one
// second by default; the buckets resolve both.
var SecondsBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// AttemptsBuckets are the bucket bounds of idem_call_attempts: DoTx runs at
// most five transactions, and Do always one.
var AttemptsBuckets = []float64{1, 2, 3, 4, 5}

// Metrics are idem's collectors. They are exported for tests and for
// applications that read them (testutil.ToFloat64 takes a collector); only
// Observe should change them.
type Metrics struct {
	Calls     *prometheus.CounterVec   // idem_calls_total{outcome, error_type}
	ClaimWait *prometheus.HistogramVec // idem_claim_wait_seconds{outcome}
	Duration  *prometheus.HistogramVec // idem_call_duration_seconds{outcome}
	Attempts  prometheus.Histogram     // idem_call_attempts
}

// New registers idem's metrics on reg. Pass their Observe method to
// idem.WithObserver. New fails if reg already has metrics of these names:
// give each Store that should be told apart its own registry, or wrap reg
// with prometheus.WrapRegistererWith and a constant label.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("promobserver: nil registerer")
	}
	m := &Metrics{
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_calls_total",
			Help: "Calls of idem's Do and DoTx, by outcome, and by class of error for outcome=\"error\".",
		}, []string{"outcome", "error_type"}),
		ClaimWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idem_claim_wait_seconds",
			Help:    "Time idem's calls spent claiming their key, including waits for another transaction holding it.",
			Buckets: SecondsBuckets,
		}, []string{"outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idem_call_duration_seconds",
			Help:    "Time of idem's calls, the protected work and DoTx's commit included.",
			Buckets: SecondsBuckets,
		}, []string{"outcome"}),
		Attempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "idem_call_attempts",
			Help:    "Transactions run per call: more than one when DoTx ran again after a conflict.",
			Buckets: AttemptsBuckets,
		}),
	}
	for _, c := range []prometheus.Collector{m.Calls, m.ClaimWait, m.Duration, m.Attempts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Create every series of the counter at zero, so that rate() and
	// alerts on increase() work before the first call of each kind.
	for _, o := range observe.Outcomes() {
		if o != observe.OutcomeError {
			m.Calls.WithLabelValues(o, "")
			continue
		}
		for _, t := range observe.ErrorTypes() {
			m.Calls.WithLabelValues(o, t)
		}
	}
	return m, nil
}

// Observe records one call. It is the observer for idem.WithObserver; it
// leaves out the Events that are not calls (takeovers, lost leases, and
// Resume's work on multi-step requests).
func (m *Metrics) Observe(_ context.Context, e idem.Event) {
	if e.Kind != idem.EventCall {
		return
	}
	outcome := observe.Outcome(e)
	m.Calls.WithLabelValues(outcome, observe.EventErrorType(e)).Inc()
	m.ClaimWait.WithLabelValues(outcome).Observe(e.ClaimWait.Seconds())
	m.Duration.WithLabelValues(outcome).Observe(e.Duration.Seconds())
	m.Attempts.Observe(float64(e.Attempts))
}
