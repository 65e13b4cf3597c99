package idemhttp_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestTxOptions shows that every transaction the middleware begins for a
// protected request, or a multi-step one, gets the options given to New, as the driver sees them
// and, on PostgreSQL, as the server does; that nil leaves them to the
// database; and that New keeps a copy, so that changing the caller's
// struct afterwards changes nothing.
func TestTxOptions(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		began := dbtest.RecordBegins(&tg)
		e := setup(t, tg)
		level := sql.LevelSerializable
		// On PostgreSQL the handler asks the server at which level its
		// transaction runs, and what the session's default is.
		var got, def string
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx := idemhttp.Tx(r.Context())
			if tx != nil && tg.Family == "postgres" {
				err := tx.QueryRowContext(r.Context(), "SELECT current_setting('transaction_isolation'), current_setting('default_transaction_isolation')").Scan(&got, &def)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
			}
			w.WriteHeader(http.StatusCreated)
		})
		for i, c := range []struct {
			name   string
			opts   *sql.TxOptions
			want   sql.IsolationLevel
			server string // on PostgreSQL; "" is the session's default
		}{
			{"nil", nil, sql.LevelDefault, ""},
			{level.String(), &sql.TxOptions{Isolation: level}, level, strings.ToLower(level.String())},
		} {
			t.Run(c.name, func(t *testing.T) {
				mw, err := idemhttp.New(e.Store, e.DB, c.opts, idemhttp.WithSingleClient())
				if err != nil {
					t.Fatal(err)
				}
				if c.opts != nil {
					c.opts.Isolation = sql.LevelReadUncommitted // New's copy must not see it
				}
				began.Take()
				got, def = "", ""
				req := httptestRequest(fmt.Sprintf("k%d", i), "{}")
				if rep := serveDirect(mw.Handler(h), req); rep.status != http.StatusCreated {
					t.Fatalf("status %d, body %q; want 201", rep.status, rep.body)
				}
				began.WantIsolation(t, "the request", c.want)
				// A multi-step request begins one transaction to claim
				// its key and one for its phase.
				steps := mw.Steps(func(*http.Request) ([]idem.Step, error) {
					return []idem.Step{idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) {
						return idem.Response{Status: http.StatusCreated}, nil
					})}, nil
				})
				if rep := serveDirect(steps, httptestRequest(fmt.Sprintf("steps%d", i), "{}")); rep.status != http.StatusCreated {
					t.Fatalf("Steps: status %d, body %q; want 201", rep.status, rep.body)
				}
				began.WantIsolation(t, "the multi-step request", c.want)
				if tg.Family == "postgres" {
					want := c.server
					if want == "" {
						want = def
					}
					if got != want {
						t.Errorf("the handler's transaction ran at %q, want %q", got, want)
					}
				}
			})
		}
	})
}
