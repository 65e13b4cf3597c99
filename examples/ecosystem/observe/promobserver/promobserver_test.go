package promobserver_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/scenario"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/observe"
	"github.com/idemgo/idem/examples/ecosystem/observe/promobserver"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	metrics, err := promobserver.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.OpenT(t)
	scenario.Run(t, db, testdb.StoreT(t, idem.WithObserver(metrics.Observe)))

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}

	// idem_calls_total: one series per outcome, and per class of error.
	want := map[[2]string]float64{}
	for _, o := range observe.Outcomes() {
		if o != observe.OutcomeError {
			want[[2]string{o, ""}] = 0
		}
	}
	for _, et := range observe.ErrorTypes() {
		want[[2]string{observe.OutcomeError, et}] = 0
	}
	for _, c := range scenario.Calls {
		want[[2]string{c.Outcome, c.ErrorType}]++
	}
	calls := byName["idem_calls_total"]
	if calls == nil || len(calls.GetMetric()) != len(want) {
		t.Fatalf("idem_calls_total: %v, want %d series", calls, len(want))
	}
	for _, m := range calls.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		k := [2]string{labels["outcome"], labels["error_type"]}
		if got, ok := want[k]; !ok || m.GetCounter().GetValue() != got {
			t.Errorf("idem_calls_total%v = %v, want %v", labels, m.GetCounter().GetValue(), got)
		}
	}

	// The histograms: a sample per call, split by outcome.
	for _, name := range []string{"idem_claim_wait_seconds", "idem_call_duration_seconds"} {
		f := byName[name]
		if f == nil {
			t.Fatalf("%s not gathered", name)
		}
		var total uint64
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			total += h.GetSampleCount()
			if h.GetSampleSum() < 0 {
				t.Errorf("%s: negative sum %v", name, h.GetSampleSum())
			}
		}
		if total != uint64(len(scenario.Calls)) {
			t.Errorf("%s: %d samples, want %d", name, total, len(scenario.Calls))
		}
	}
	retries := byName["idem_call_attempts"].GetMetric()[0].GetHistogram()
	wantSum := 0
	for _, c := range scenario.Calls {
		wantSum += c.Attempts
	}
	if retries.GetSampleCount() != uint64(len(scenario.Calls)) || retries.GetSampleSum() != float64(wantSum) {
		t.Errorf("idem_call_attempts: %d samples summing to %v, want %d summing to %d",
			retries.GetSampleCount(), retries.GetSampleSum(), len(scenario.Calls), wantSum)
	}

	// The same counts through testutil, as an alerting rule would see them.
	if n := testutil.CollectAndCount(reg, "idem_calls_total"); n != len(want) {
		t.Errorf("CollectAndCount = %d", n)
	}
	problems, err := promlint.NewWithMetricFamilies(families).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestToFloat64 reads single series, as a unit test of an application
// would.
func TestToFloat64(t *testing.T) {
	t.Parallel()
	metrics, err := promobserver.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.OpenT(t)
	scenario.Run(t, db, testdb.StoreT(t, idem.WithObserver(metrics.Observe)))

	for _, tc := range []struct {
		outcome, errorType string
		want               float64
	}{
		{"claimed", "", 1},
		{"replay", "", 1},
		{"mismatch", "", 1},
		{"in_flight", "", 0},
		{"error", "too_large", 1},
		{"error", "other", 1},
		{"error", "retry", 1},
		{"error", "corrupt", 0},
		{"error", "commit_unknown", 0},
	} {
		if got := testutil.ToFloat64(metrics.Calls.WithLabelValues(tc.outcome, tc.errorType)); got != tc.want {
			t.Errorf("idem_calls_total{outcome=%q,error_type=%q} = %v, want %v", tc.outcome, tc.errorType, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(metrics.Attempts); n != 1 {
		t.Errorf("idem_call_attempts: %d series", n)
	}
}

func TestRegisterTwice(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := promobserver.New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := promobserver.New(reg); err == nil {
		t.Fatal("a second New on one registry succeeded")
	}
	if _, err := promobserver.New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}

// TestOnlyCalls shows that the Events of multi-step requests that are not
// calls, a takeover or a lost lease, are left out of the call metrics.
func TestOnlyCalls(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	metrics, err := promobserver.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	metrics.Observe(context.Background(), idem.Event{Kind: idem.EventTakeover, Step: "order", Outcome: idem.Claimed})
	metrics.Observe(context.Background(), idem.Event{Kind: idem.EventLeaseLost, Step: "charged", Err: idem.ErrLeaseLost})
	metrics.Observe(context.Background(), idem.Event{Outcome: idem.Claimed})
	if n := testutil.ToFloat64(metrics.Calls.WithLabelValues(observe.OutcomeClaimed, "")); n != 1 {
		t.Errorf("%v claimed calls, want 1", n)
	}
	if n := testutil.ToFloat64(metrics.Calls.WithLabelValues(observe.OutcomeError, observe.ErrorOther)); n != 0 {
		t.Errorf("%v failed calls, want 0", n)
	}
}
