package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
	"github.com/idemgo/idem/proving/fault"
)

// lossyEnv is an env on SQLite whose connections obey ctl.
func lossyEnv(t *testing.T) (*env, *fault.Lossy) {
	t.Helper()
	return lossySetup(t, dbtest.SQLite(""))
}

// lossySetup is setup on tg, with connections that obey the returned ctl.
func lossySetup(t *testing.T, tg target, opts ...idem.Option) (*env, *fault.Lossy) {
	t.Helper()
	ctl := &fault.Lossy{}
	tg.Wrap = ctl.Connector
	return setup(t, tg, opts...), ctl
}

func TestDoTxLostCommitReply(t *testing.T) {
	ctx := context.Background()

	t.Run("the commit happened", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		runs := 0
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			ctl.SetCommit(fault.LoseReply)
			return e.Effect("k", dbtest.Created)(ctx, tx)
		})
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, dbtest.Created)
		if runs != 1 {
			t.Errorf("fn ran %d times, want 1: the commit went through", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the commit landed after the lookup", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		other := make(chan idem.Outcome, 1)
		ctl.Landed = func() {
			res, _ := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, dbtest.MustNotRun(t))
			other <- res.Outcome
		}
		runs := 0
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			if runs == 1 {
				ctl.SetCommit(fault.LandLate)
			}
			return e.Effect("k", dbtest.Created)(ctx, tx)
		})
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		dbtest.SameResponse(t, res.Response, dbtest.Created)
		if runs != 1 {
			t.Errorf("fn ran %d times, want 1: the commit landed", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
		select {
		case got := <-other:
			if got != idem.Replay {
				t.Errorf("another call once the commit landed: %v, want Replay", got)
			}
		default:
			t.Error("the held commit never landed")
		}
	})

	t.Run("the commit did not happen", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		runs := 0
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			if runs == 1 {
				ctl.SetCommit(fault.DropCommit)
			}
			return e.Effect("k", dbtest.Created)(ctx, tx)
		})
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		if runs != 2 {
			t.Errorf("fn ran %d times, want 2: nothing was committed the first time", runs)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})

	t.Run("the lookup fails too", func(t *testing.T) {
		e, ctl := lossyEnv(t)
		_, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			ctl.SetCommit(fault.LoseReply)
			resp, err := e.Effect("k", dbtest.Created)(ctx, tx)
			ctl.FailQueries(true) // after the claim, before the lookup
			return resp, err
		})
		if !errors.Is(err, idem.ErrCommitUnknown) || !errors.Is(err, fault.ErrReplyLost) {
			t.Errorf("DoTx: %v, want ErrCommitUnknown wrapping the commit's error", err)
		}
		ctl.FailQueries(false)
		res, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, dbtest.MustNotRun(t))
		dbtest.WantOutcome(t, res, err, idem.Replay)
	})
}

func TestDoTxEndsItsTransaction(t *testing.T) {
	ctx := context.Background()
	e := setup(t, dbtest.SQLite(""))
	e.DB.SetMaxOpenConns(1) // a transaction left open would block the next call

	t.Run("on a panic", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("DoTx swallowed fn's panic")
			}
		}()
		_, _ = e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, func(context.Context, *sql.Tx) (idem.Response, error) {
			panic("handler bug")
		})
	})
	for _, o := range []struct {
		name string
		fn   idem.Func
	}{
		{"on an error", func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, errors.New("no") }},
		{"on Claimed", e.Effect("k", dbtest.Created)},
		{"on Replay", dbtest.MustNotRun(t)},
	} {
		t.Run(o.name, func(t *testing.T) {
			_, _ = e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, o.fn)
			if n := e.DB.Stats().InUse; n != 0 {
				t.Errorf("%d connections still in use", n)
			}
		})
	}
	if n := e.EffectCount(t, "k"); n != 1 {
		t.Errorf("%d effect rows, want 1", n)
	}
}
