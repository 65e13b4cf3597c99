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
// are set.
func TestPaths(t *testing.T) {
	dir := t.TempDir()
	for i := range kinds {
		k := &kinds[i]
		t.Run(k.name, func(t *testing.T) {
			main, _ := k.setting(k.main)
			d, ok := k.database(dir, main, commitFast)
			if !ok {
				t.Skipf("%s is not set: run scripts/test, which starts PostgreSQL, MariaDB and MySQL and runs every test", k.env)
			}
			ctx := context.Background()
			b, err := open(ctx, d, 2, openOpts{http: true, lease: true})
			if err != nil {
				t.Fatal(err)
			}
			defer b.close()
			key := "k-" + k.name
			steps := []struct {
				name string
				do   func() error
			}{
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
			}
			for _, s := range steps {
				if err := s.do(); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
			}

			m := b.leaseHTTP.(*leaseMiddleware)
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
			if ok, err := m.reserve(ctx, held, hash, 1, now); err != nil || !ok {
				t.Fatalf("reserve: %v, %v", ok, err)
			}
			if ok, err := m.reserve(ctx, held, []byte("h"), 2, now); err != nil || ok {
				t.Fatalf("reserve a held key: %v, %v, want false", ok, err)
			}
			if rec := send(key+"-held", orderJSON); rec.Code != http.StatusConflict {
				t.Errorf("a held key: %d, want 409", rec.Code)
			}
			// Its lease expires: the next request takes the key over.
			later := now + leaseTime.Microseconds()
			if ok, err := m.reserve(ctx, held, []byte("h"), 3, later); err != nil || !ok {
				t.Fatalf("reserve a key whose lease expired: %v, %v, want true", ok, err)
			}
			// A finished key is never taken over, whatever its expiry.
			done := []byte(idemhttp.StoredKey("", key+"-lease"))
			if ok, err := m.reserve(ctx, done, []byte("h"), 4, later+leaseKeep.Microseconds()); err != nil || ok {
				t.Fatalf("reserve a finished key: %v, %v, want false", ok, err)
			}
		})
	}
}
