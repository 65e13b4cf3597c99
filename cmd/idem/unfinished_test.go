package main

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestUnfinished leaves two multi-step requests unfinished, one held by
// its runner and one given up after its first phase, and finishes a third:
// the list shows the two, oldest first, with their steps and leases.
func TestUnfinished(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		ctx := context.Background()
		began := t0.Add(-10 * time.Minute)
		store := tb.store(t, idem.WithClock(func() time.Time { return began }), idem.WithLease(time.Hour))
		down := errors.New("provider unreachable")
		phase := func(context.Context, *sql.Tx) error { return nil }
		final := func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{Status: 201}, nil }
		run := func(key string, call func(context.Context, string) error) error {
			_, err := store.Run(ctx, tb.db, key, idem.Fingerprint([]byte(key)),
				idem.Phase("order", phase), idem.Call("charge", call), idem.Final("confirm", final))
			return err
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
		want := regexp.MustCompile(`^KEY +STEP +BEGAN +LEASE\n` +
			`"given-up" +order +10m0s ago +ran out 10m0s ago\n` +
			`"held" +order +9m0s ago +held, runs out in 51m0s\n$`)
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

		r = runWith(t, testEnv(t0), append([]string{"inspect"}, tb.args("given-up")...)...)
		r.wantCode(t, exitOK)
		if !strings.Contains(r.stdout, "state    unfinished: a multi-step request") || !strings.Contains(r.stdout, "expires  not while it is unfinished\n") {
			t.Errorf("inspect of an unfinished request:\n%s", r.stdout)
		}

		r = runWith(t, testEnv(t0), append([]string{"unfinished", "-age", "1h"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		if r.stdout != "no unfinished multi-step requests in "+tb.table+" older than 1h0m\n" {
			t.Errorf("-age 1h: %q", r.stdout)
		}
	})
}
