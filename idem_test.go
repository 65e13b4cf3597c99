package idem_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/internal/dbtest"
)

var (
	hashA = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":88}`))
	hashB = idem.Fingerprint([]byte("POST"), []byte("/orders"), []byte(`{"item":89}`))

	// created is a response with every part that must survive a replay.
	created = idem.Response{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "", "b"}},
		Body:   []byte("{\"order\":1}\x00\xff\n"),
	}
)

// TestConformance runs the whole contract of Do on every database the tests
// reach, through each built-in dialect, on PostgreSQL behind PgBouncer, on
// Vitess's sharded keyspace, and on Citus through its coordinator.
func TestConformance(t *testing.T) {
	conform := func(t *testing.T, tg target) {
		idemtest.TestDialect(t, tg.Dialect, func(t *testing.T) *sql.DB { return tg.Open(t) })
	}
	forEachPooled(t, conform)
	for _, tg := range vitessWithSettings() {
		t.Run(tg.Name, func(t *testing.T) { conform(t, tg) })
	}
	dbtest.SkipMissingVitess(t)
	forEachCitus(t, conform)
}

func sameResponse(t *testing.T, got, want idem.Response) {
	t.Helper()
	if got.Status != want.Status || !reflect.DeepEqual(got.Header, want.Header) || !bytes.Equal(got.Body, want.Body) {
		t.Errorf("response = %d %v %q, want %d %v %q", got.Status, got.Header, got.Body, want.Status, want.Header, want.Body)
	}
}

func wantOutcome(t *testing.T, res idem.Result, err error, want idem.Outcome) {
	t.Helper()
	if err != nil {
		t.Fatalf("Do: %v, want outcome %v", err, want)
	}
	if res.Outcome != want {
		t.Fatalf("outcome = %v, want %v", res.Outcome, want)
	}
}

// TestPostgresReplayWritesNothing shows that a replay does not even give its
// transaction an id, which PostgreSQL assigns at the first write.
func TestPostgresReplayWritesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		if tg.Family != "postgres" {
			t.Skip("PostgreSQL only")
		}
		e := setup(t, tg)
		ctx := context.Background()
		res, err := e.Do(t, "k", hashA, e.Effect("k", created), true)
		wantOutcome(t, res, err, idem.Claimed)
		tx := e.Begin(t, nil)
		res, err = e.Store.Do(ctx, tx, "k", hashA, mustNotRun(t))
		wantOutcome(t, res, err, idem.Replay)
		var xid sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT txid_current_if_assigned()").Scan(&xid); err != nil {
			t.Fatal(err)
		}
		if xid.Valid {
			t.Errorf("the replay wrote: its transaction has id %d", xid.Int64)
		}
	})
}

func TestRefuseWithoutRefusable(t *testing.T) {
	e := setup(t, dbtest.SQLite(""))
	refuse := func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{}, idem.Refuse(idem.Response{Status: 402})
	}
	if _, err := e.Do(t, "k", hashA, refuse, true); err == nil || !strings.Contains(err.Error(), "Refusable") {
		t.Errorf("Do = %v, want an error that names Refusable", err)
	}
	if _, err := e.Store.Lookup(context.Background(), e.DB, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup: %v, want ErrNotFound", err)
	}
}

func TestMigrateTwice(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		if err := e.Store.Migrate(context.Background(), e.DB); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		if len(e.Store.Schema()) == 0 {
			t.Fatal("empty Schema")
		}
	})
}
