package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// t0 is when the tests' records are claimed: microseconds are part of it,
// since the table keeps them.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)

func TestInspect(t *testing.T) {
	forEach(t, func(t *testing.T, tb *testDB) {
		store := tb.store(t, idem.WithClock(func() time.Time { return t0 }))
		e := testEnv(t0.Add(3 * time.Minute))
		inspect := func(t *testing.T, more ...string) result {
			t.Helper()
			return runWith(t, e, append([]string{"inspect"}, tb.args(more...)...)...)
		}

		t.Run("Finished", func(t *testing.T) {
			tb.put(t, store, "order-1", idem.Response{
				Status: 201,
				Header: http.Header{"Location": {"/orders/1"}, "Content-Type": {"application/json"}},
				Body:   []byte(`{"order":1}`),
			})
			r := inspect(t, "-key", "order-1")
			r.wantCode(t, exitOK)
			equalLines(t, r.stdout,
				`key      "order-1"`,
				`state    finished: the request ran and committed; a retry gets this response back`,
				`created  2025-03-04 05:06:07.123456 UTC (3m0s ago)`,
				`expires  2025-03-05 05:06:07.123456 UTC (in 23h57m)`,
				`record   incarnation `+tb.incarnation(t, store, "order-1"),
				`status   201 Created`,
				`header   Content-Type: application/json`,
				`         Location: /orders/1`,
				`body     11 bytes:`,
				`{"order":1}`)
		})

		t.Run("Scoped", func(t *testing.T) {
			tb.put(t, store, idemhttp.StoredKey("acct_42", "order-9"), idem.Response{Status: 201, Body: []byte(`{"order":9}`)})
			r := inspect(t, "-scope", "acct_42", "-key", "order-9")
			r.wantCode(t, exitOK)
			if !strings.Contains(r.stdout, "status   201 Created") || !strings.Contains(r.stdout, `{"order":9}`) {
				t.Errorf("inspect -scope shows:\n%s", r.stdout)
			}
			inspect(t, "-key", "order-9").wantCode(t, exitNotFound)
		})

		t.Run("NotFound", func(t *testing.T) {
			r := inspect(t, "-key", "never-sent")
			r.wantCode(t, exitNotFound)
			equalLines(t, r.stdout,
				`key      "never-sent"`,
				`state    not found: no live record for this key`,
				`         it was never committed, or it expired, or a transaction holding it has not committed yet`,
				`         a key that came through idemhttp or idemgrpc needs -scope or -single-client (idem inspect -h)`)
		})

		t.Run("Expired", func(t *testing.T) {
			old := tb.store(t, idem.WithClock(func() time.Time { return t0.Add(-48 * time.Hour) }))
			tb.put(t, old, "order-0", idem.Response{Status: 201})
			r := inspect(t, "-key", "order-0")
			r.wantCode(t, exitNotFound)
			equalLines(t, r.stdout,
				`key      "order-0"`,
				`state    not found: no live record for this key`,
				`         it was never committed, or it expired, or a transaction holding it has not committed yet`,
				`         a key that came through idemhttp or idemgrpc needs -scope or -single-client (idem inspect -h)`,
				`         an expired record waits for purge: created 2025-03-02 05:06:07.123456 UTC, expired 2025-03-03 05:06:07.123456 UTC (24h3m ago);`,
				`         it no longer counts, and a request with this key runs as a new one`)
		})

		t.Run("InFlight", func(t *testing.T) {
			// A record committed without its response, as Do never leaves
			// one: written by hand.
			tb.exec(t, "INSERT INTO {T} ({key}, request_hash, created_at, expires_at, token) VALUES ($1, $2, $3, $4, $5)",
				[]byte("order-2"), []byte("h"), t0.UnixMicro(), t0.Add(time.Hour).UnixMicro(), 1)
			r := inspect(t, "-key", "order-2")
			r.wantCode(t, exitOK)
			equalLines(t, r.stdout,
				`key      "order-2"`,
				`state    in flight: the key is claimed but no response is stored; a retry gets 409 until it expires`,
				`         if its handler committed the transaction itself, see idem settle -h and idem release -h`,
				`created  2025-03-04 05:06:07.123456 UTC (3m0s ago)`,
				`expires  2025-03-04 06:06:07.123456 UTC (in 57m0s)`,
				`record   incarnation 0: created before the table had the column`)
		})

		t.Run("Corrupt", func(t *testing.T) {
			tb.put(t, store, "order-3", idem.Response{Status: 201, Body: []byte("fine")})
			incarnation := tb.incarnation(t, store, "order-3")
			tb.exec(t, "UPDATE {T} SET body = $1 WHERE {key} = $2", []byte("tampered"), []byte("order-3"))
			r := inspect(t, "-key", "order-3")
			r.wantCode(t, exitCorrupt)
			got := lines(r.stdout)
			want := []string{
				`key      "order-3"`,
				`state    corrupt: stored record is corrupt: checksum does not match`,
				`created  2025-03-04 05:06:07.123456 UTC (3m0s ago)`,
				`expires  2025-03-05 05:06:07.123456 UTC (in 23h57m)`,
				`record   incarnation ` + incarnation,
				`status   201`,
			}
			if len(got) != len(want)+2 || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") ||
				!strings.HasPrefix(got[len(want)], "size     header ") || !strings.HasSuffix(got[len(want)], ", body 8 bytes") {
				t.Errorf("output:\n%s\nwant it to start:\n%s\nsize     header ... body 8 bytes", r.stdout, strings.Join(want, "\n"))
			}
		})

		t.Run("Bodies", func(t *testing.T) {
			long := strings.Repeat("é", 1500) // 3000 bytes
			tb.put(t, store, "long", idem.Response{Status: 200, Body: []byte(long)})
			r := inspect(t, "-key", "long", "-max", "1001")
			r.wantCode(t, exitOK)
			if !strings.HasSuffix(r.stdout, "body     3000 bytes:\n"+long[:1000]+"\n... 2000 more bytes: -full shows them all\n") {
				t.Errorf("-max 1001 must show 1000 bytes, up to the last whole character:\n%s", r.stdout)
			}
			r = inspect(t, "-full", "-key", "long")
			r.wantCode(t, exitOK)
			if !strings.HasSuffix(r.stdout, "body     3000 bytes:\n"+long+"\n") {
				t.Errorf("-full must show the whole body:\n%s", r.stdout)
			}

			for key, body := range map[string]string{"binary": "\x00\x01\xff", "escape": "\x1b[2Jgotcha"} {
				tb.put(t, store, key, idem.Response{Status: 200, Body: []byte(body)})
				r = inspect(t, "-key", key)
				r.wantCode(t, exitOK)
				if !strings.HasSuffix(r.stdout, "\nbody     "+strconv.Itoa(len(body))+" bytes, not printable UTF-8: not shown\n") || strings.Contains(r.stdout, body) {
					t.Errorf("a body that is not printable must not be shown:\n%q", r.stdout)
				}
			}

			tb.put(t, store, "empty", idem.Response{Status: 204})
			r = inspect(t, "-key", "empty")
			r.wantCode(t, exitOK)
			if !strings.HasSuffix(r.stdout, "status   204 No Content\nheader   (none)\nbody     (empty)\n") {
				t.Errorf("empty response:\n%s", r.stdout)
			}
		})
	})
}
