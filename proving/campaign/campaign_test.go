package campaign

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestMain serves as a campaign's service when the campaign under test
// starts this test binary as one.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(EnvService); cfg != "" {
		var c ServiceConfig
		if err := json.Unmarshal([]byte(cfg), &c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := Serve(context.Background(), c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSeedFixesOperationsAndFaults shows what docs/reliability.md says of
// a seed: two campaigns with one seed send the same operations, each
// client's in the same order, and cause the same faults at the same times;
// another seed changes them. What the operations are answered depends on
// the servers' timing, which no seed fixes.
func TestSeedFixesOperationsAndFaults(t *testing.T) {
	const seed = 20261207
	sqlite := Target{Name: "sqlite", Family: "sqlite", Dialect: "sqlite", Driver: "sqlite"}
	run := func() (ops map[string]Op, faults []Fault) {
		rep, err := Run(context.Background(), Config{
			Target:   sqlite,
			Duration: 6 * time.Second, Seed: seed, Clients: 3, Services: 2, MaxOps: 24,
			Dir: t.TempDir(), Log: testLog{t},
		})
		if err != nil {
			t.Fatal(err)
		}
		events, err := ReadHistory(rep.History)
		if err != nil {
			t.Fatal(err)
		}
		ops = map[string]Op{}
		for _, e := range events {
			switch {
			case e.Type == EvInvoke && e.Op.Client != drainClient:
				op := *e.Op
				op.Stored, op.StoredShard = nil, 0 // what Unfinished listed then, not the plan
				ops[op.ID()] = op
			case e.Type == EvFault:
				faults = append(faults, *e.Fault)
			}
		}
		return ops, faults
	}
	ops1, faults1 := run()
	ops2, faults2 := run()
	if len(ops1) < 3*24+24/4 {
		t.Errorf("the first run sent %d operations, want at least %d", len(ops1), 3*24+24/4)
	}
	if !reflect.DeepEqual(ops1, ops2) {
		t.Errorf("one seed sent other operations:\n%v\n%v", ops1, ops2)
	}
	if len(faults1) == 0 || !reflect.DeepEqual(faults1, faults2) {
		t.Errorf("one seed caused other faults:\n%v\n%v", faults1, faults2)
	}
	other := NewPlan(seed+1, 3, 2, 6*time.Second, sqlite, nil)
	if reflect.DeepEqual(other.Faults, faults1) || reflect.DeepEqual(other.ClientOp(0, 0), ops1["0.0"]) && reflect.DeepEqual(other.ClientOp(0, 1), ops1["0.1"]) {
		t.Error("another seed made the same plan")
	}
}

// testLog sends the services' standard error to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p))
	return len(p), nil
}
