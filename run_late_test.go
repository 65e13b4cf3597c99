package idem

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// lateEnv is a Store on a fresh SQLite database, with a lease long enough
// that none runs out during a test, and the steps of a request whose phase
// and final step count their runs.
func lateEnv(t *testing.T) (*Store, *sql.DB, []Step, *int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "idem.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(SQLite(), WithLease(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	runs := new(int)
	steps := []Step{
		Phase("order", func(context.Context, *sql.Tx) error { *runs++; return nil }),
		Final("confirm", func(context.Context, *sql.Tx) (Response, error) {
			*runs++
			return Response{Status: 201, Body: []byte("done")}, nil
		}),
	}
	return s, db, steps, runs
}

// TestRunAdoptsLateBegin shows what a commit of Run's first transaction
// that lands after the lookup which found nothing leads to: the request's
// record carries a token of this call's, and the next attempt takes it as
// its own, where any other call answers InFlight until the lease runs out.
func TestRunAdoptsLateBegin(t *testing.T) {
	ctx := context.Background()
	s, db, steps, runs := lateEnv(t)
	landed := &stepRun[*sql.Tx]{s: s, db: sqlDB{db: db}, key: "k", reqHash: []byte("h"), steps: steps}
	if _, err := landed.begin(ctx); err != nil {
		t.Fatal(err)
	}

	other := &stepRun[*sql.Tx]{s: s, db: sqlDB{db: db}, key: "k", reqHash: []byte("h"), steps: steps}
	if res, err := other.run(ctx); err != nil || res.Outcome != InFlight {
		t.Fatalf("another call: %v, %v; want InFlight", res.Outcome, err)
	}
	same := &stepRun[*sql.Tx]{s: s, db: sqlDB{db: db}, key: "k", reqHash: []byte("h"), steps: steps, late: []int64{landed.v.token}}
	res, err := same.run(ctx)
	if err != nil || res.Outcome != Claimed || string(res.Response.Body) != "done" {
		t.Fatalf("the call whose commit landed late: %v %q, %v; want Claimed", res.Outcome, res.Response.Body, err)
	}
	if *runs != 2 {
		t.Errorf("%d runs of the steps, want 2", *runs)
	}
}

// TestRunAdoptsLatePhase shows the same for a phase: its next attempt
// finds the record under the token of the attempt that landed late, and
// takes the phase as committed, final response and all, instead of
// reporting the lease lost; without that token it is lost.
func TestRunAdoptsLatePhase(t *testing.T) {
	ctx := context.Background()
	for i, name := range []string{"order", "confirm"} {
		s, db, steps, runs := lateEnv(t)
		r := &stepRun[*sql.Tx]{s: s, db: sqlDB{db: db}, key: "k", reqHash: []byte("h"), steps: steps}
		if _, err := r.begin(ctx); err != nil {
			t.Fatal(err)
		}
		held := r.v.token
		if _, err := r.phase(name, steps[i].phase)(ctx); err != nil {
			t.Fatal(err)
		}
		landed := r.v.token
		// As after a lost reply that the lookup did not find: the call
		// holds the token it had before the phase.
		r.v.token, r.v.prevToken = held, landed
		if _, err := r.phase(name, steps[i].phase)(ctx); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s without the late token: %v, want ErrLeaseLost", name, err)
		}
		r.v.token, r.v.prevToken = held, landed
		r.late = []int64{landed}
		resp, err := r.phase(name, steps[i].phase)(ctx)
		if err != nil {
			t.Fatalf("%s with the late token: %v", name, err)
		}
		if got := resp != nil; got != (name == "confirm") || (resp != nil && string(resp.Body) != "done") {
			t.Errorf("%s: response %+v", name, resp)
		}
		if r.v.token != landed || *runs != 1 {
			t.Errorf("%s: token %d (want %d), %d runs (want 1)", name, r.v.token, landed, *runs)
		}
	}
}
