package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestSQLRunner runs a request through the Runner of SQLRunner, as an
// adapter does: serve's context carries the transaction, in which the
// effect commits with the record, once; a retry replays without serve;
// Run hands its Final step the *sql.Tx; and a nil database makes no
// Runner, which adapters refuse at start-up.
func TestSQLRunner(t *testing.T) {
	e := setup(t, dbtest.SQLite(""))
	if r := idem.SQLRunner(e.Store, nil, nil); r != nil {
		t.Errorf("SQLRunner of a nil database = %v, want nil", r)
	}
	if r := idem.EngineRunner[*sql.Tx](idem.EngineOf[*sql.Tx](e.Store), nil); r != nil {
		t.Errorf("EngineRunner of a nil database = %v, want nil", r)
	}
	run := idem.SQLRunner(e.Store, e.DB, nil)
	ctx := context.Background()
	served := 0
	serve := func(ctx context.Context) (idem.Response, error) {
		served++
		tx := idem.TxFrom[*sql.Tx](ctx)
		if tx == nil {
			return idem.Response{}, errors.New("serve's context carries no *sql.Tx")
		}
		return idem.Response{Status: 201, Body: []byte("made")}, e.Effects.Insert(ctx, tx, "k1", "order")
	}
	hash := idem.Fingerprint([]byte("order"))
	for i, want := range []idem.Outcome{idem.Claimed, idem.Replay} {
		res, err := run.DoTx(ctx, "k1", hash, serve)
		if err != nil || res.Outcome != want || string(res.Response.Body) != "made" {
			t.Fatalf("DoTx %d: %v %q, %v; want %v with the response", i+1, res.Outcome, res.Response.Body, err, want)
		}
	}
	if served != 1 || e.EffectCount(t, "k1") != 1 {
		t.Errorf("served %d times, %d effects; want 1 and 1", served, e.EffectCount(t, "k1"))
	}

	var finalTx *sql.Tx
	res, err := run.Run(ctx, "k2", hash, []idem.Step{idem.Final("confirm", func(_ context.Context, tx *sql.Tx) (idem.Response, error) {
		finalTx = tx
		return idem.Response{Status: 200}, nil
	})})
	if err != nil || res.Outcome != idem.Claimed || finalTx == nil {
		t.Errorf("Run: %v, %v, the Final step's tx %v; want Claimed, with a *sql.Tx", res.Outcome, err, finalTx)
	}
}

// TestTxFromByType shows that WithTx keeps one transaction per type: a
// *sql.Tx is not found as another driver's transaction, nor the other way
// round, and a context without one gives the type's zero value.
func TestTxFromByType(t *testing.T) {
	type otherTx struct{ name string }
	ctx := context.Background()
	if tx := idem.TxFrom[*sql.Tx](ctx); tx != nil {
		t.Errorf("TxFrom of an empty context = %v, want nil", tx)
	}
	sqlTx := new(sql.Tx)
	other := &otherTx{"the other driver's"}
	ctx = idem.WithTx(ctx, sqlTx)
	if got := idem.TxFrom[*otherTx](ctx); got != nil {
		t.Errorf("TxFrom[*otherTx] of a context with a *sql.Tx = %v, want nil", got)
	}
	ctx = idem.WithTx(ctx, other)
	if got := idem.TxFrom[*sql.Tx](ctx); got != sqlTx {
		t.Errorf("TxFrom[*sql.Tx] = %p, want %p: the other driver's transaction must not hide it", got, sqlTx)
	}
	if got := idem.TxFrom[*otherTx](ctx); got != other {
		t.Errorf("TxFrom[*otherTx] = %v, want %v", got, other)
	}
}
