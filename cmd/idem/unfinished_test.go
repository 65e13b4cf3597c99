package main

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// runOrder runs a request of key with store: a phase, a call, and a final
// phase that answers 201.
func runOrder(ctx context.Context, store *idem.Store, db *sql.DB, key string, call func(context.Context, string) error) error {
	phase := func(context.Context, *sql.Tx) error { return nil }
	final := func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{Status: 201}, nil }
	_, err := store.Run(ctx, db, nil, key, idem.Fingerprint([]byte(key)),
		idem.Phase("order", phase), idem.Call("charge", call), idem.Final("confirm", final))
	return err
}

// TestUnfinished leaves two multi-step requests unfinished, one held by
// its runner and one given up after its first phase, and finishes a third:
// the list shows the two, oldest first, with their steps and leases. Their
// ages are by the Store's clock, ten minutes back; their leases by the
// database's, which no WithClock moves.
func TestUnfinished(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		ctx := context.Background()
		began := t0.Add(-10 * time.Minute)
		store := tb.store(t, idem.WithClock(func() time.Time { return began }), idem.WithLease(time.Hour))
		down := errors.New("provider unreachable")
		run := func(key string, call func(context.Context, string) error) error {
			return runOrder(ctx, store, tb.db, key, call)
		}
		if err := run("given-up", func(context.Context, string) error { return down }); !errors.Is(err, down) {
			t.Fatalf("Run: %v, want the provider's error", err)
		}
		began = began.Add(time.Minute)
		held := make(chan struct{})
		release := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- run("held", func(context.Context, string) error { close(held); <-release; return nil })
		}()
		defer func() { close(release); <-done }()
		<-held
		if err := run("finished", func(context.Context, string) error { return nil }); err != nil {
			t.Fatal(err)
		}

		r := runWith(t, testEnv(t0), append([]string{"unfinished"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		incarnations := map[string]int64{}
		list, err := store.Unfinished(ctx, tb.db, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list {
			if u.Incarnation == 0 {
				t.Errorf("Unfinished: %q has no incarnation", u.Key)
			}
			incarnations[u.Key] = u.Incarnation
		}
		want := regexp.MustCompile(`^KEY +STEP +BEGAN +LEASE +RESUMER +INCARNATION\n` +
			`"given-up" +order +10m0s ago +ran out \d+s ago +takes it next +` + strconv.FormatInt(incarnations["given-up"], 10) + `\n` +
			`"held" +order +9m0s ago +held, runs out in (59m\d+s|1h0m) +in (59m\d+s|1h0m) +` + strconv.FormatInt(incarnations["held"], 10) + `\n$`)
		if !want.MatchString(r.stdout) {
			t.Errorf("stdout:\n%s\nwant it to match %v", r.stdout, want)
		}

		r = runWith(t, testEnv(t0), append([]string{"unfinished", "-age", "9m30s", "-limit", "1"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stdout, `"given-up"`) || strings.Contains(r.stdout, `"held"`) || !strings.Contains(r.stdout, "-limit shows more") {
			t.Errorf("-age 9m30s -limit 1:\n%s", r.stdout)
		}
		// idem stats counts the two among the keys in flight (docs/operations.md).
		r = runWith(t, testEnv(t0), append([]string{"stats"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stdout, "\nin flight     2\n") {
			t.Errorf("stats:\n%s\nwant the two unfinished requests in flight", r.stdout)
		}

		r = runWith(t, testEnv(t0), append([]string{"inspect"}, tb.args("-key", "given-up")...)...)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stdout, "state    unfinished: a multi-step request") || !strings.Contains(r.stdout, "expires  not while it is unfinished\n") ||
			!strings.HasSuffix(r.stdout, "record   incarnation "+strconv.FormatInt(incarnations["given-up"], 10)+"\n") {
			t.Errorf("inspect of an unfinished request:\n%s", r.stdout)
		}

		r = runWith(t, testEnv(t0), append([]string{"unfinished", "-age", "1h"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		if r.stdout != "no unfinished multi-step requests in "+tb.table+" older than 1h0m\n" {
			t.Errorf("-age 1h: %q", r.stdout)
		}
	})
}

// TestSettleReleaseUnfinished shows what settle and release do with
// multi-step requests: both refuse one whose runner holds its lease, even
// in a call; release refuses one past its first phase unless told with
// -phases-undone; settle ends one for good, with an expiry from then, which
// inspect shows.
func TestSettleReleaseUnfinished(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		ctx := context.Background()
		store := tb.store(t, idem.WithClock(func() time.Time { return t0 }), idem.WithLease(time.Hour), idem.WithRetention(time.Hour))
		down := errors.New("provider unreachable")
		run := func(key string, call func(context.Context, string) error) error {
			return runOrder(ctx, store, tb.db, key, call)
		}
		for _, key := range []string{"given-up-1", "given-up-2"} {
			if err := run(key, func(context.Context, string) error { return down }); !errors.Is(err, down) {
				t.Fatalf("Run: %v, want the provider's error", err)
			}
		}
		held, letGo, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- run("held", func(context.Context, string) error { close(held); <-letGo; return nil })
		}()
		defer func() { close(letGo); <-done }()
		<-held

		e := testEnv(t0.Add(time.Minute))
		cmd := func(args ...string) result {
			t.Helper()
			return runWith(t, e, append(args[:1:1], tb.args(args[1:]...)...)...)
		}
		for _, r := range []result{
			cmd("settle", "-key", "held", "-status", "500"),
			cmd("release", "-key", "held", "-no-effect"),
			cmd("release", "-key", "held", "-no-effect", "-phases-undone"),
		} {
			r.wantCode(t, exitHeld)
			if !strings.Contains(r.stderr, "the lease of its multi-step request runs until") {
				t.Errorf("stderr %q, want it to say that the lease is live", r.stderr)
			}
		}

		r := cmd("release", "-key", "given-up-1", "-no-effect")
		r.wantCode(t, exitPhases)
		if !strings.Contains(r.stderr, `it stands at step "order"`) || !strings.Contains(r.stderr, "-phases-undone") {
			t.Errorf("release past a phase: stderr %q", r.stderr)
		}
		cmd("release", "-key", "given-up-1", "-no-effect", "-phases-undone").wantCode(t, exitOK)
		if _, err := store.Lookup(ctx, tb.db, "given-up-1"); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("Lookup after release -phases-undone: %v, want ErrNotFound", err)
		}

		cmd("settle", "-key", "given-up-2", "-status", "502", "-body", "refunded", "-retention", "1h").wantCode(t, exitOK)
		r = cmd("inspect", "-key", "given-up-2")
		r.wantCode(t, exitOK)
		if want := "expires  " + t0.Add(time.Minute+time.Hour).UTC().Format("2006-01-02 15:04:05"); !strings.Contains(r.stdout, want) {
			t.Errorf("inspect of the settled request:\n%s\nwant %q", r.stdout, want)
		}
	})
}

// TestUnfinishedResumeAge runs idem unfinished, built as go build makes
// it, on a multi-step request that idemhttp's Steps left unfinished, its
// provider down, by a service whose clock is 20 seconds behind this
// machine's: the request is 20 seconds old and its lease has run out.
// Resume with its defaults takes it at a minute old, so RESUMER says in how
// long, at most 40 seconds, and not that Resume takes it next; with
// -resume-age, the age that the service gives ResumeOlderThan, it says when
// that Resume takes it.
func TestUnfinishedResumeAge(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		builtCommand(t) // before the clock of the request's age starts
		store := tb.store(t, idem.WithClock(func() time.Time { return time.Now().Add(-20 * time.Second) }))
		fx := newEffects(t, tb)
		mw, err := idemhttp.New(store, tb.db, nil, idemhttp.WithSingleClient())
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Steps(func(r *http.Request) ([]idem.Step, error) {
			key := r.Header.Get("Idempotency-Key")
			return []idem.Step{
				idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error { return fx.Insert(ctx, tx, key, "placed") }),
				idem.Call("charge", func(context.Context, string) error { return errors.New("provider unreachable") }),
				idem.Final("confirm", func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{Status: 201}, nil }),
			}, nil
		})
		req := httptest.NewRequest(http.MethodPost, "/orders", nil)
		req.Header.Set("Idempotency-Key", "order-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("POST /orders with the provider down: %d %s, want 503", w.Code, w.Body)
		}

		row := func(t *testing.T, more ...string) []string {
			t.Helper()
			r := runBuilt(t, append([]string{"unfinished"}, tb.args(more...)...)...)
			r.wantCode(t, exitOK)
			l := lines(r.stdout)
			if len(l) != 2 || !strings.HasPrefix(l[1], strconv.Quote(idemhttp.StoredKey("", "order-1"))+" ") {
				t.Fatalf("idem unfinished %s:\n%s\nwant the request of order-1 alone", strings.Join(more, " "), r.stdout)
			}
			return regexp.MustCompile(`  +`).Split(l[1], -1)
		}
		// KEY, STEP, BEGAN, LEASE, RESUMER, INCARNATION
		u := row(t)
		if !strings.HasPrefix(u[3], "ran out ") {
			t.Errorf("LEASE %q, want it run out", u[3])
		}
		if !regexp.MustCompile(`^in ([1-3]?\d|40)s$`).MatchString(u[4]) {
			t.Errorf("RESUMER of a request 20s old with the default age: %q, want in 40s or less", u[4])
		}
		if got := row(t, "-resume-age", "10s")[4]; got != "takes it next" {
			t.Errorf("RESUMER with -resume-age 10s: %q, want takes it next", got)
		}
		if got := row(t, "-resume-age", "1h")[4]; !regexp.MustCompile(`^in 59m[1-4]?\ds$`).MatchString(got) {
			t.Errorf("RESUMER with -resume-age 1h: %q, want in 59m40s or less", got)
		}
		r := runBuilt(t, append([]string{"unfinished"}, tb.args("-resume-age", "-1s")...)...)
		wantError(t, r, exitUsage, "idem: -resume-age must not be negative, got -1s")
	})
}
