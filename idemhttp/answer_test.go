package idemhttp_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/answer"
	"github.com/idemgo/idem/internal/runnerfuncs"
)

// TestAnswersAsTheTable holds the middleware to the table of answers that
// idemgrpc answers by too (internal/answer), entry by entry, so that it
// fails when the middleware answers an outcome or an error otherwise, or
// when the table has an answer that no request here gets. Through a Runner
// that returns each outcome and each error of the table, wrapped as the
// Store wraps its sentinels, Handler answers as answer.Outcome and
// answer.DoTx say, and Steps as answer.Outcome and answer.Run say: the
// status, the problem's slug, and a Retry-After exactly where the answer
// asks for a retry. The refusals before the Runner (no key, a malformed
// key, an unknown client) are the table's too.
func TestAnswersAsTheTable(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	var (
		res  idem.Result // what the runner answers
		rerr error
	)
	run := runnerfuncs.Runner{
		DoTxFunc: func(ctx context.Context, _ string, _ []byte, serve func(context.Context) (idem.Response, error)) (idem.Result, error) {
			if rerr == nil && res.Outcome == idem.Claimed {
				resp, err := serve(ctx)
				return idem.Result{Outcome: idem.Claimed, Response: resp}, err
			}
			return res, rerr
		},
		RunFunc: func(context.Context, string, []byte, []idem.Step) (idem.Result, error) { return res, rerr },
	}
	scope := idemhttp.WithScope(func(r *http.Request) (string, error) {
		if c := r.Header.Get("X-Client"); c != "" {
			return c, nil
		}
		return "", errors.New("no client")
	})
	m, err := idemhttp.NewWithRunner(store, run, scope, idemhttp.WithKeyRequired())
	if err != nil {
		t.Fatal(err)
	}
	stored := idem.Response{Status: http.StatusCreated, Body: []byte("stored")}
	handlers := map[string]http.Handler{
		"Handler": m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "stored")
		})),
		"Steps": m.Steps(func(*http.Request) ([]idem.Step, error) {
			return []idem.Step{idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return stored, nil })}, nil
		}),
	}
	answered := map[answer.Answer]bool{}
	// check sends a request to the handler named path, with key and
	// client (none when empty), and holds its answer to want: the
	// response itself for the zero Answer.
	check := func(t *testing.T, path, key, client string, want answer.Answer) {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":1}`))
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		if client != "" {
			r.Header.Set("X-Client", client)
		}
		w := httptest.NewRecorder()
		handlers[path].ServeHTTP(w, r)
		if want == (answer.Answer{}) {
			if w.Code != http.StatusCreated || w.Body.String() != "stored" {
				t.Errorf("%s: %d %q, want the response", path, w.Code, w.Body)
			}
			return
		}
		answered[want] = true
		var p struct {
			Type   string
			Status int
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Errorf("%s, %s: problem body %q: %v", path, want.Slug, w.Body, err)
		}
		if w.Code != want.Status || p.Status != want.Status || p.Type != idemhttp.DefaultProblemTypeBase+want.Slug {
			t.Errorf("%s: %d %s, want the table's %d %s", path, w.Code, p.Type, want.Status, want.Slug)
		}
		if got := w.Header().Get("Retry-After"); (got != "") != want.Retry {
			t.Errorf("%s, %s: Retry-After %q, want one: %v", path, want.Slug, got, want.Retry)
		}
	}

	// sub runs a subtest, and counts those that ran: a -run that leaves
	// some out leaves their answers unserved, and the check of the whole
	// table below is then not made.
	started, ran := 0, 0
	sub := func(name string, f func(t *testing.T)) {
		started++
		t.Run(name, func(t *testing.T) {
			ran++
			f(t)
		})
	}
	for o, a := range answer.Outcomes {
		sub("outcome/"+o.String(), func(t *testing.T) {
			res, rerr = idem.Result{Outcome: o, Response: stored}, nil
			for path := range handlers {
				check(t, path, "k", "alice", a)
			}
		})
	}
	sub("outcome/undefined", func(t *testing.T) {
		res, rerr = idem.Result{}, nil
		want, _ := answer.Outcome(0)
		for path := range handlers {
			check(t, path, "k", "alice", want)
		}
	})
	for _, c := range []struct {
		path  string
		rules *answer.Rules
	}{{"Handler", &answer.DoTx}, {"Steps", &answer.Run}} {
		errs := map[error]answer.Answer{errors.New("a database's own error"): c.rules.Default}
		for _, rule := range c.rules.Match {
			errs[rule.Err] = rule.Answer
		}
		for _, sentinel := range c.rules.Rest {
			errs[sentinel] = c.rules.Default
		}
		for sentinel, want := range errs {
			sub(c.path+"/"+sentinel.Error(), func(t *testing.T) {
				res, rerr = idem.Result{}, fmt.Errorf("idem: wrapped: %w", sentinel)
				check(t, c.path, "k", "alice", want)
			})
		}
	}
	sub("before the runner", func(t *testing.T) {
		res, rerr = idem.Result{}, errors.New("the runner must not be reached")
		for path := range handlers {
			check(t, path, "", "alice", answer.KeyRequired)
			check(t, path, strings.Repeat("k", 256), "alice", answer.InvalidKey)
			check(t, path, "k", "", answer.ClientUnknown)
		}
	})
	if ran < started {
		t.Logf("%d of %d subtests ran: not checking that every answer of the table was served", ran, started)
		return
	}
	for _, a := range answer.All {
		if !answered[a] {
			t.Errorf("no request got the table's %s: the test does not hold the middleware to it", a.Slug)
		}
	}
}
