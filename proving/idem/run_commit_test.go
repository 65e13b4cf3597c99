package idem_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
	"github.com/idemgo/idem/proving/fault"
)

// TestRunLostCommitReply loses the reply to each of Run's commits in turn,
// after the server committed, on every database: Run settles the commit by
// a lookup within the same call and goes on, so the request finishes in
// that call with every phase committed once. A commit that did not happen
// is run again, and one that lands only after the lookup is taken as this
// call's own. When the lookup fails as well, Run says that the outcome is
// unknown and gives its lease up, so that the client's retry resumes the
// request at once.
func TestRunLostCommitReply(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		e, ctl := lossySetup(t, tg)
		// run runs a request whose commit at the step named at fails
		// as mode says; "" is the first transaction, before any step.
		run := func(key, at string, mode fault.Commit) (*order, idem.Result, error) {
			o := &order{e: e, key: key}
			lost := false
			lose := func(step string) { // once: a phase run again commits
				if step == at && !lost {
					lost = true
					ctl.SetCommit(mode)
				}
			}
			lose("")
			phase := func(name string) func(context.Context, *sql.Tx) error {
				return func(ctx context.Context, tx *sql.Tx) error {
					lose(name)
					return o.phase(name)(ctx, tx)
				}
			}
			steps := []idem.Step{
				idem.Phase("order", phase("order")),
				o.steps()[1],
				idem.Phase("charged", phase("charged")),
				idem.Final("confirm", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
					return orderResponse, phase("confirm")(ctx, tx)
				}),
			}
			res, err := e.Store.Run(ctx, e.DB, nil, key, dbtest.HashA, steps...)
			return o, res, err
		}
		for _, at := range []string{"", "order", "charged", "confirm"} {
			for _, mode := range []fault.Commit{fault.LoseReply, fault.DropCommit} {
				key := "lost-at-" + cmp.Or(at, "begin") + "-" + map[fault.Commit]string{fault.LoseReply: "landed", fault.DropCommit: "dropped"}[mode]
				t.Run(key, func(t *testing.T) {
					o, res, err := run(key, at, mode)
					if ctl.Pending() != 0 {
						t.Fatal("no commit failed")
					}
					o.wantDoneOnce(t, res, err)
				})
			}
		}

		// A commit that lands after the lookup that settles it, which
		// found the record without it: the next attempt of the same call
		// finds the record under that commit's token and goes on from
		// there, while another call meets the request in flight (or, once
		// the final step's commit landed, replays it).
		for _, at := range []string{"", "order", "charged", "confirm"} {
			key := "late-at-" + cmp.Or(at, "begin")
			t.Run(key, func(t *testing.T) {
				want := idem.InFlight
				if at == "confirm" {
					want = idem.Replay
				}
				other := make(chan error, 1)
				ctl.Landed = func() {
					res, err := e.Store.Run(ctx, e.DB, nil, key, dbtest.HashA, (&order{e: e, key: key}).steps()...)
					if err == nil && res.Outcome != want {
						err = fmt.Errorf("another call once the commit landed: %v, want %v", res.Outcome, want)
					}
					other <- err
				}
				defer func() { ctl.Landed = nil }()
				o, res, err := run(key, at, fault.LandLate)
				if ctl.Pending() != 0 {
					t.Fatal("no commit failed")
				}
				o.wantDoneOnce(t, res, err)
				select {
				case err := <-other:
					if err != nil {
						t.Error(err)
					}
				default:
					t.Error("the held commit never landed")
				}
			})
		}

		for _, at := range []string{"", "order"} {
			key := "unknown-at-" + cmp.Or(at, "begin")
			t.Run(key, func(t *testing.T) {
				o, _, err := run(key, at, fault.LoseReplyAndQueries)
				ctl.FailQueries(false)
				if !errors.Is(err, idem.ErrCommitUnknown) || !errors.Is(err, fault.ErrReplyLost) {
					t.Fatalf("Run: %v, want ErrCommitUnknown wrapping the commit's error", err)
				}
				// The lease was given up: the retry resumes at once.
				res, err := o.run(t, dbtest.HashA)
				dbtest.WantOutcome(t, res, err, idem.Claimed)
				dbtest.SameResponse(t, res.Response, orderResponse)
				o.wantPhases(t, map[string]int{"order": 1, "charged": 1, "confirm": 1})
			})
		}
	})
}

// TestRunLostCommitReplyOverTCP cuts the connection between Run and the
// server at the COMMIT of its first transaction, and at that of a phase:
// after passing it on, before, or, for the first transaction, passing it on
// only once Run has looked the record up, found nothing, and sent the claim
// of its next attempt. Every request finishes in the same call, with each
// phase committed once and one call to the provider.
func TestRunLostCommitReplyOverTCP(t *testing.T) {
	dbtest.ForEachRunTarget(t, func(t *testing.T, tg target) {
		if tg.Family == "sqlite" {
			t.Skip("SQLite has no network between the client and the database")
		}
		for _, c := range []struct {
			at   string
			mode fault.Cut
		}{
			{"", fault.CutAfterCommit},
			{"", fault.CutBeforeCommit},
			{"", fault.CutLateCommit},
			{"charged", fault.CutAfterCommit},
			{"charged", fault.CutBeforeCommit},
		} {
			name := cmp.Or(c.at, "begin") + map[fault.Cut]string{fault.CutAfterCommit: ", the server committed",
				fault.CutBeforeCommit: ", the commit never arrived", fault.CutLateCommit: ", the commit landed after the lookup"}[c.mode]
			t.Run(name, func(t *testing.T) {
				// As in TestLostCommitReplyOverTCP: room for the server to
				// free the cut session's locks on a loaded machine.
				e := setup(t, tg, idem.WithLockTimeout(10*time.Second))
				p, db := e.proxied(t)
				o := &order{e: e, key: "k"}
				steps := o.steps()
				if c.at == "" {
					p.SetCut(c.mode)
				} else {
					cut := false
					steps[2] = idem.Phase("charged", func(ctx context.Context, tx *sql.Tx) error {
						if !cut {
							cut = true
							p.SetCut(c.mode)
						}
						return o.phase("charged")(ctx, tx)
					})
				}
				res, err := e.Store.Run(context.Background(), db, nil, o.key, dbtest.HashA, steps...)
				if p.Pending() != fault.CutNothing {
					t.Error("the proxy never saw the COMMIT")
				}
				o.wantDoneOnce(t, res, err)
			})
		}
	})
}
