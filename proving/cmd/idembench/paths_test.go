package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// TestPaths runs each path of the comparison once, and the lease
// middleware's other answers, on SQLite and on the servers whose variables
// are set, and then the paths of each native setting (native.go).
func TestPaths(t *testing.T) {
	dir := t.TempDir()
	for i := range kinds {
		k := &kinds[i]
		t.Run(k.name, func(t *testing.T) {
			main, _ := k.setting(k.main)
			d := testDatabase(t, dir, k, main)
			ctx := context.Background()
			b, err := open(ctx, d, 2, openOpts{http: true, lease: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.close()
			key := "k-" + k.name
			runSteps(t, []step{
				{"plain", func() error { return b.plainNew(ctx, key+"-plain", 1, 7) }},
				{"plain replay", func() error { return b.plainReplay(ctx, key+"-plain") }},
				{"hand", func() error { return b.hand(ctx, key+"-hand", 5, 8, false) }},
				{"claimed", func() error { return b.claimed(ctx, key+"-claimed", 1, nil) }},
				{"plain replay of claimed", func() error { return b.plainReplay(ctx, key+"-claimed") }},
				{"replay", func() error { return b.replay(ctx, key+"-claimed") }},
				{"http", func() error { return post(ctx, b.http, key+"-http", false) }},
				{"http replay", func() error { return post(ctx, b.http, key+"-http", true) }},
				{"lease", func() error { return post(ctx, b.leaseHTTP, key+"-lease", false) }},
				{"lease replay", func() error { return post(ctx, b.leaseHTTP, key+"-lease", true) }},
			})
			checkLeaseAnswers(t, ctx, b.leaseHTTP.(*leaseMiddleware), key)
		})
		for _, s := range k.settings {
			if !s.native {
				continue
			}
			t.Run(k.name+" "+s.key, func(t *testing.T) {
				d := testDatabase(t, dir, k, s)
				ctx := context.Background()
				b, err := open(ctx, d, 2, openOpts{http: true, lease: true, pgx: true})
				if err != nil {
					t.Fatal(err)
				}
				defer b.close()
				key := "k-" + s.key
				runSteps(t, []step{
					{"plain", func() error { return b.pgxPlainNew(ctx, key+"-plain", 1, 7) }},
					{"plain x5", func() error { return b.pgxPlainNew(ctx, key+"-plain5", 5, 8) }},
					{"plain replay", func() error { return b.pgxPlainReplay(ctx, key+"-plain") }},
					{"bare", func() error { return b.pgxBare(ctx, key+"-bare", 1) }},
					{"claimed", func() error { return b.pgxDoTx(ctx, b.store, key+"-claimed", 1, idem.Claimed) }},
					{"claimed x5", func() error { return b.pgxDoTx(ctx, b.store, key+"-claimed5", 5, idem.Claimed) }},
					{"claimed sql", func() error { return b.doTx(ctx, b.store, key+"-claimed-sql", 1, idem.Claimed) }},
					// Each side retries the record the other finished.
					{"replay", func() error { return b.pgxDoTx(ctx, b.claimFirst, key+"-claimed-sql", 1, idem.Replay) }},
					{"replay sql", func() error { return b.doTx(ctx, b.claimFirst, key+"-claimed", 1, idem.Replay) }},
					{"plain replay of claimed", func() error { return b.pgxPlainReplay(ctx, key+"-claimed") }},
					{"http", func() error { return post(ctx, b.pgxHTTP, key+"-http", false) }},
					{"http replay", func() error { return post(ctx, b.pgxHTTP, key+"-http", true) }},
					{"http sql", func() error { return post(ctx, b.http, key+"-http-sql", false) }},
					{"http sql replay", func() error { return post(ctx, b.http, key+"-http-sql", true) }},
					{"lease", func() error { return post(ctx, b.pgxLeaseHTTP, key+"-lease", false) }},
					{"lease replay", func() error { return post(ctx, b.pgxLeaseHTTP, key+"-lease", true) }},
				})
				// Every new key committed its effect once, the replays none.
				for suffix, want := range map[string]int{"-plain": 1, "-plain5": 5, "-bare": 1, "-claimed": 1, "-claimed5": 5,
					"-claimed-sql": 1, "-http": 1, "-http-sql": 1, "-lease": 1} {
					var n int
					if err := b.db.QueryRowContext(ctx, "SELECT count(*) FROM "+b.orders+" WHERE k = $1", []byte(key+suffix)).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n != want {
						t.Errorf("%s: %d orders, want %d", key+suffix, n, want)
					}
				}
				checkLeaseAnswers(t, ctx, b.pgxLeaseHTTP.(*leaseMiddleware), key)
			})
		}
	}
}

// testDatabase returns k under setting s, or skips the test when k's
// server is not set.
func testDatabase(t *testing.T, dir string, k *kind, s setting) database {
	t.Helper()
	d, ok := k.database(dir, s, commitFast)
	if !ok {
		t.Skipf("%s is not set: run scripts/test, which starts PostgreSQL, MariaDB and MySQL, and TiDB when asked, and runs every test", k.env)
	}
	return d
}

type step struct {
	name string
	do   func() error
}

func runSteps(t *testing.T, steps []step) {
	t.Helper()
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}

// checkLeaseAnswers checks m's answers besides a new key and its replay,
// which key+"-lease" was: another request with that key, a key held by a
// request that runs, its lease expiring, and a finished key whose lease
// would have.
func checkLeaseAnswers(t *testing.T, ctx context.Context, m *leaseMiddleware, key string) {
	t.Helper()
	send := func(key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, req)
		return rec
	}
	if rec := send(key+"-lease", `{"item":43,"qty":1}`); rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("another request with a finished key: %d, want 422", rec.Code)
	}
	// A key reserved by a request that is still running.
	held := []byte(idemhttp.StoredKey("", key+"-held"))
	hash := idem.Fingerprint([]byte(http.MethodPost), []byte("/orders"), nil, []byte(orderJSON))
	now := time.Now().UnixMicro()
	if ok, err := m.db.reserve(ctx, held, hash, 1, now); err != nil || !ok {
		t.Fatalf("reserve: %v, %v", ok, err)
	}
	if ok, err := m.db.reserve(ctx, held, []byte("h"), 2, now); err != nil || ok {
		t.Fatalf("reserve a held key: %v, %v, want false", ok, err)
	}
	if rec := send(key+"-held", orderJSON); rec.Code != http.StatusConflict {
		t.Errorf("a held key: %d, want 409", rec.Code)
	}
	// Its lease expires: the next request takes the key over.
	later := now + leaseTime.Microseconds()
	if ok, err := m.db.reserve(ctx, held, []byte("h"), 3, later); err != nil || !ok {
		t.Fatalf("reserve a key whose lease expired: %v, %v, want true", ok, err)
	}
	// A finished key is never taken over, whatever its expiry.
	done := []byte(idemhttp.StoredKey("", key+"-lease"))
	if ok, err := m.db.reserve(ctx, done, []byte("h"), 4, later+leaseKeep.Microseconds()); err != nil || ok {
		t.Fatalf("reserve a finished key: %v, %v, want false", ok, err)
	}
}
