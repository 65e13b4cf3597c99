package main

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/idemgo/idem"
)

// TestStats counts an empty table, then one of expired and live records, and
// measures it, on every database the command knows.
func TestStats(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, tb *testDB) {
		e := testEnv(t0.Add(time.Minute))
		stats := func(t *testing.T) result {
			t.Helper()
			r := runWith(t, e, append([]string{"stats"}, tb.args()...)...)
			r.wantCode(t, exitOK)
			return r
		}
		name := tb.Dialect.Name()
		size := regexp.MustCompile(`^size on disk  (\d+ bytes|\d+\.\d [KMGT]iB \((\d+) bytes\)), (.+)$`)

		tb.store(t)
		r := stats(t)
		got := lines(r.stdout)
		equalLines(t, r.stdout,
			"table         "+tb.table+" ("+name+")",
			"live keys     0",
			"in flight     0",
			"expired keys  0",
			"oldest key    none: the table is empty",
			got[len(got)-1])
		if !size.MatchString(got[len(got)-1]) {
			t.Errorf("size line %q does not match %v", got[len(got)-1], size)
		}

		// Two records claimed two days before now expired a day ago; three
		// claimed at t0 are live.
		old := tb.store(t, idem.WithClock(func() time.Time { return t0.Add(-48 * time.Hour) }))
		now := tb.store(t, idem.WithClock(func() time.Time { return t0 }))
		for i := range 2 {
			tb.put(t, old, fmt.Sprint("old-", i), idem.Response{Status: 200})
		}
		for i := range 3 {
			tb.put(t, now, fmt.Sprint("new-", i), idem.Response{Status: 200, Body: make([]byte, 1000)})
		}
		r = stats(t)
		got = lines(r.stdout)
		equalLines(t, r.stdout,
			"table         "+tb.table+" ("+name+")",
			"live keys     3",
			"in flight     0",
			"expired keys  2, waiting for idem purge",
			"oldest key    created 2025-03-02 05:06:07.123456 UTC (2d0h ago)",
			got[len(got)-1])
		m := size.FindStringSubmatch(got[len(got)-1])
		if m == nil {
			t.Fatalf("size line %q does not match %v", got[len(got)-1], size)
		}
		if n, _ := strconv.Atoi(m[2]); m[2] != "" && n < 3000 && !tb.sizeLags {
			// InnoDB's figures come from statistics that lag behind.
			t.Errorf("size %d bytes, want at least the 3000 bytes of the bodies", n)
		}
		if m[3] != tb.sizeFrom {
			t.Errorf("size measured by %q, want %q", m[3], tb.sizeFrom)
		}
	})
}
