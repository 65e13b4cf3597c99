package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/proving/dbtest"
)

// wantDemo checks the demo's table and its verdict.
func wantDemo(t *testing.T, r result) {
	t.Helper()
	r.wantCode(t, exitOK)
	for _, re := range []string{
		`(?m)^POST /orders book +order-[0-9a-f]{6}-a +claimed +201 +order \d+ placed; the response is lost on the way back$`,
		`(?m)^  retry, same request +order-[0-9a-f]{6}-a +replay +201 +order \d+'s stored response, nothing done again; lost again$`,
		`(?m)^  retry, same request +order-[0-9a-f]{6}-a +replay +201 +order \d+'s stored response: the client has its answer$`,
		`(?m)^8 x POST /orders lamp, at once +order-[0-9a-f]{6}-b +claimed x1 +201 +one copy placed order \d+$`,
		`(?m)^ +replay x7 +201 +the others waited for it, then got its response$`,
		`(?m)^POST /orders kettle, same key +order-[0-9a-f]{6}-a +mismatch +422 +the key belongs to the book order: refused, nothing done$`,
		`(?m)^  order-[0-9a-f]{6}-a  1 order, order \d+, as its stored response says: ok$`,
		`(?m)^  order-[0-9a-f]{6}-b  1 order, order \d+, as its stored response says: ok$`,
		`(?m)^Every key has exactly one order: the retries and the duplicates did no harm.$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("demo output does not match %s:\n%s", re, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "unexpected") || r.stderr != "" {
		t.Errorf("demo: stdout\n%s\nstderr %q", r.stdout, r.stderr)
	}
}

// By default the demo runs on a temporary SQLite file, whatever IDEM_DSN
// says, and leaves nothing behind.
func TestDemoDefault(t *testing.T) {
	t.Parallel()
	e := testEnv(time.Now())
	e.getenv = func(k string) string {
		return map[string]string{envDSN: "postgres://production.invalid/shop", envDialect: "postgres"}[k]
	}
	r := runWith(t, e, "demo")
	wantDemo(t, r)
	m := regexp.MustCompile(`^idem demo on SQLite, in (.+) \(deleted at the end\)\n`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("first line of the demo: %q", lines(r.stdout)[0])
	}
	if _, err := os.Stat(filepath.Dir(m[1])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo's temporary directory is still there: %v", err)
	}
}

// On a named database the demo uses its own tables, and runs again with
// fresh keys.
func TestDemo(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		orders := tb.table + "_orders"
		tb.dropAtEnd(t, orders)
		args := append([]string{"demo", "-orders", orders}, tb.args()...)
		for range 2 {
			r := runCmd(t, args...)
			wantDemo(t, r)
			first := "idem demo on " + tb.Dialect.Name()
			if tb.fileTitle != "" {
				first = "idem demo on " + tb.fileTitle + ", in " + tb.dsn
			} else if strings.Contains(r.stdout, tb.dsn) {
				t.Errorf("the demo shows the DSN, which may carry a password:\n%s", r.stdout)
			}
			if got := lines(r.stdout)[0]; got != first {
				t.Errorf("first line %q, want %q", got, first)
			}
		}
		// Two runs, two orders each: one per key.
		var n int
		if err := tb.db.QueryRow("SELECT COUNT(*) FROM " + tb.quote(orders)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 4 {
			t.Errorf("%d orders after two runs, want 4", n)
		}
	})
}

// The check fails when a key has more than one order, or an order its
// response does not name.
func TestDemoCheckFails(t *testing.T) {
	t.Parallel()
	tb := newTestDB(t, commandTarget(t, dbtest.SQLite("")))
	store := tb.store(t)
	s := newShop(tb.d, tb.db, store, tb.table+"_orders")
	ctx := context.Background()
	if err := s.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.order(ctx, "k1", "book"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.order(ctx, "k2", "lamp"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := s.check(ctx, &out, []string{"k1", "k2"}); err != nil {
		t.Fatalf("check of a sound database: %v\n%s", err, out.String())
	}

	// A second order for k1, as a double charge would leave.
	if _, err := tb.db.Exec("INSERT INTO "+s.orders+" (idem_key, item) VALUES (?, ?)", "k1", "book"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err := s.check(ctx, &out, []string{"k1", "k2"})
	if err == nil || !strings.Contains(err.Error(), "1 of 2 keys") {
		t.Errorf("check with two orders for k1: %v", err)
	}
	if !regexp.MustCompile(`(?m)^  k1  2 orders \[1 3\]: WRONG, want exactly one$`).MatchString(out.String()) {
		t.Errorf("check output:\n%s", out.String())
	}

	// The only order of k2 is not the one its response names.
	if _, err := tb.db.Exec("UPDATE "+s.orders+" SET id = 9 WHERE idem_key = ?", "k2"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := s.check(ctx, &out, []string{"k2"}); err == nil {
		t.Errorf("check with a renumbered order passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "  k2  order 9, but its stored response names order 2: WRONG") {
		t.Errorf("check output:\n%s", out.String())
	}
}
