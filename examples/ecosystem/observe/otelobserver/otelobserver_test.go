package otelobserver_test

import (
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/scenario"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/observe/otelobserver"
)

func TestInstruments(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(t.Context()) })
	observer, err := otelobserver.New(provider.Meter("github.com/idemgo/idem"))
	if err != nil {
		t.Fatal(err)
	}
	db := testdb.OpenT(t)
	scenario.Run(t, db, testdb.StoreT(t, idem.WithObserver(observer)))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 {
		t.Fatalf("%d scopes, want 1", len(rm.ScopeMetrics))
	}
	got := map[string]metricdata.Metrics{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		got[m.Name] = m
	}

	// idem.calls: a data point per outcome, and per class of error.
	type series struct{ outcome, errorType string }
	want := map[series]int64{}
	for _, c := range scenario.Calls {
		want[series{c.Outcome, c.ErrorType}]++
	}
	sum, ok := got["idem.calls"].Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic || got["idem.calls"].Unit != "{call}" {
		t.Fatalf("idem.calls: %+v", got["idem.calls"])
	}
	if len(sum.DataPoints) != len(want) {
		t.Errorf("idem.calls: %d data points, want %d", len(sum.DataPoints), len(want))
	}
	for _, dp := range sum.DataPoints {
		outcome, _ := dp.Attributes.Value("outcome")
		errorType, hasType := dp.Attributes.Value("error.type")
		if hasType != (outcome.AsString() == "error") {
			t.Errorf("idem.calls%v: error.type must come with outcome=error alone", dp.Attributes.ToSlice())
		}
		s := series{outcome.AsString(), errorType.AsString()}
		if dp.Value != want[s] {
			t.Errorf("idem.calls%v = %d, want %d", dp.Attributes.ToSlice(), dp.Value, want[s])
		}
		delete(want, s)
	}
	for s, n := range want {
		t.Errorf("idem.calls: no data point for %+v (want %d)", s, n)
	}

	// The duration histograms: one sample per call, by outcome alone.
	outcomes := map[string]uint64{}
	for _, c := range scenario.Calls {
		outcomes[c.Outcome]++
	}
	for _, name := range []string{"idem.claim_wait", "idem.call.duration"} {
		h, ok := got[name].Data.(metricdata.Histogram[float64])
		if !ok || got[name].Unit != "s" {
			t.Fatalf("%s: %+v", name, got[name])
		}
		seen := map[string]uint64{}
		for _, dp := range h.DataPoints {
			if dp.Attributes.Len() != 1 {
				t.Errorf("%s: attributes %v, want outcome alone", name, dp.Attributes.ToSlice())
			}
			o, _ := dp.Attributes.Value("outcome")
			seen[o.AsString()] += dp.Count
			if dp.Sum < 0 || len(dp.Bounds) != len(otelobserver.SecondsBoundaries) {
				t.Errorf("%s: sum %v, bounds %v", name, dp.Sum, dp.Bounds)
			}
		}
		if len(seen) != len(outcomes) {
			t.Errorf("%s: outcomes %v, want %v", name, seen, outcomes)
		}
		for o, n := range outcomes {
			if seen[o] != n {
				t.Errorf("%s{outcome=%s}: %d samples, want %d", name, o, seen[o], n)
			}
		}
	}

	attempts, ok := got["idem.call.attempts"].Data.(metricdata.Histogram[int64])
	if !ok || len(attempts.DataPoints) != 1 {
		t.Fatalf("idem.call.attempts: %+v", got["idem.call.attempts"])
	}
	dp := attempts.DataPoints[0]
	var wantSum int64
	for _, c := range scenario.Calls {
		wantSum += int64(c.Attempts)
	}
	if dp.Count != uint64(len(scenario.Calls)) || dp.Sum != wantSum || dp.Attributes.Len() != 0 {
		t.Errorf("idem.call.attempts: %d samples summing to %d with %v, want %d summing to %d",
			dp.Count, dp.Sum, dp.Attributes.ToSlice(), len(scenario.Calls), wantSum)
	}
	if maxv, ok := dp.Max.Value(); !ok || maxv != 5 {
		t.Errorf("idem.call.attempts: max %v, want 5 (DoTx's last attempt)", maxv)
	}
}
