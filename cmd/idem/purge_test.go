package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestPurge purges the expired records and keeps the live ones, with a
// progress line on a terminal, on every database the command knows.
func TestPurge(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, tb *testDB) {
		old := tb.store(t, idem.WithClock(func() time.Time { return t0.Add(-48 * time.Hour) }))
		now := tb.store(t, idem.WithClock(func() time.Time { return t0 }))
		for i := range 5 {
			tb.put(t, old, fmt.Sprint("old-", i), idem.Response{Status: 200})
		}
		for i := range 3 {
			tb.put(t, now, fmt.Sprint("new-", i), idem.Response{Status: 200})
		}

		// A terminal shows the progress line, and clears it at the end.
		e := testEnv(t0.Add(time.Minute))
		e.terminal = true
		r := runWith(t, e, append([]string{"purge"}, tb.args("-batch", "2")...)...)
		r.wantCode(t, exitOK)
		summary := regexp.MustCompile(`^purged 5 expired keys from ` + tb.table + ` in [0-9.]+(µs|ms|s) \(\d+ rows/s\)$`)
		if !summary.MatchString(strings.TrimSuffix(r.stdout, "\n")) || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("summary %q does not match %v", r.stdout, summary)
		}
		start := "\rpurging " + tb.table + ": 0 of 5 expired keys deleted (0%), 0 rows/s\x1b[K"
		if !strings.HasPrefix(r.stderr, start) || !strings.HasSuffix(r.stderr, "\r\x1b[K") {
			t.Errorf("progress on a terminal: %q, want it to start with %q and end by clearing the line", r.stderr, start)
		}

		// The live keys are untouched, and the expired ones gone.
		for i := range 3 {
			if _, err := now.Lookup(context.Background(), tb.db, fmt.Sprint("new-", i)); err != nil {
				t.Errorf("live key new-%d after purge: %v", i, err)
			}
		}
		var n int
		if err := tb.db.QueryRow("SELECT COUNT(*) FROM " + tb.quote(tb.table)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3 {
			t.Errorf("%d records left, want the 3 live ones", n)
		}

		// Elsewhere, only the summary; and a second purge finds nothing.
		e.terminal = false
		r = runWith(t, e, append([]string{"purge"}, tb.args()...)...)
		r.wantCode(t, exitOK)
		if !strings.HasPrefix(r.stdout, "purged 0 expired keys from "+tb.table+" in ") || r.stderr != "" {
			t.Errorf("second purge: stdout %q, stderr %q", r.stdout, r.stderr)
		}
	})
}
