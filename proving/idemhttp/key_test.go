package idemhttp_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

func TestMalformedKeysAre400(t *testing.T) {
	e := setup(t, dbtest.SQLite(sqliteParams))
	h := e.protect(t)(e.orders())
	for _, c := range []struct {
		name   string
		values []string
	}{
		{"empty", []string{""}},
		{"blank", []string{"   "}},
		{"256 characters", []string{strings.Repeat("k", 256)}},
		{"256 characters quoted", []string{`"` + strings.Repeat("k", 256) + `"`}},
		{"a control character", []string{"ab\x01c"}},
		{"a tab", []string{"ab\tc"}},
		{"DEL", []string{"ab\x7fc"}},
		{"non-ASCII", []string{"schlüssel"}},
		{"empty quoted", []string{`""`}},
		{"only spaces quoted", []string{`"   "`}},
		{"leading space quoted", []string{`" a"`}},
		{"trailing space quoted", []string{`"a "`}},
		{"no closing quote", []string{`"abc`}},
		{"an escape of a letter", []string{`"a\bc"`}},
		{"an escaped closing quote", []string{`"abc\"`}},
		{"a lone backslash at the end", []string{`"abc\`}},
		{"text after the closing quote", []string{`"abc"def`}},
		{"parameters", []string{`"abc";v=1`}},
		{"a quoted control character", []string{"\"a\x01\""}},
		{"two header lines", []string{"a", "b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", "/orders", strings.NewReader("book"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header["Idempotency-Key"] = c.values
			wantProblem(t, serveDirect(h, req), http.StatusBadRequest, "invalid-key", "")
		})
	}
	if n := e.runs.Load(); n != 0 {
		t.Errorf("the handler ran %d times, want 0", n)
	}
}

func TestRequiredKey(t *testing.T) {
	e := setup(t, dbtest.SQLite(sqliteParams))
	srv := e.serve(t, e.orders(), idemhttp.WithKeyRequired(), idemhttp.WithKeyHeader("x-request-key"))
	wantProblem(t, send(t, srv, "POST", "/orders", "", "book"), http.StatusBadRequest, "key-required", "")
	// The key header is the configured one.
	wantProblem(t, send(t, srv, "POST", "/orders", "k", "book"), http.StatusBadRequest, "key-required", "")
	rep := sendHeader(t, srv, "POST", "/orders", http.Header{"X-Request-Key": {"k"}}, strings.NewReader("book"))
	wantRan(t, rep, http.StatusCreated, 1)
	// Unprotected methods need no key.
	wantRan(t, send(t, srv, "GET", "/orders", "", ""), http.StatusCreated, 2)
}

func TestQuotedKeys(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		srv := e.serve(t, e.orders())
		long := strings.Repeat("k", idemhttp.MaxClientKeyLength)
		run := 0
		for _, c := range []struct{ name, first, retry, key string }{
			{"quoted, then plain", `"abc"`, `abc`, `abc`},
			{"plain, then quoted with escapes", `a"b\c`, `"a\"b\\c"`, `a"b\c`},
			{"a space inside", `"order 1"`, `order 1`, `order 1`},
			{"the longest key", long, `"` + long + `"`, long},
		} {
			t.Run(c.name, func(t *testing.T) {
				run++
				first := sendHeader(t, srv, "POST", "/orders", keyHeader(c.first), strings.NewReader("book"))
				wantRan(t, first, http.StatusCreated, run)
				wantReplay(t, sendHeader(t, srv, "POST", "/orders", keyHeader(c.retry), strings.NewReader("book")), first)
				if res, err := e.lookup(t, "", c.key); err != nil || res.Outcome != idem.Replay {
					t.Errorf("Lookup(StoredKey(%q)) = %v, %v; want Replay", c.key, res.Outcome, err)
				}
			})
		}
	})
}

func TestStoredKey(t *testing.T) {
	sum := sha256.Sum256([]byte("acct_42"))
	if got, want := idemhttp.StoredKey("acct_42", "order-1"), hex.EncodeToString(sum[:])+":order-1"; got != want {
		t.Errorf("StoredKey = %q, want %q", got, want)
	}
	if idemhttp.StoredKey("a", "k") == idemhttp.StoredKey("b", "k") {
		t.Error("two scopes share a stored key")
	}
	if n := len(idemhttp.StoredKey(strings.Repeat("s", 1<<16), strings.Repeat("k", idemhttp.MaxClientKeyLength))); n > idem.MaxStoredKeyBytes {
		t.Errorf("the longest stored key has %d bytes, more than idem.MaxStoredKeyBytes", n)
	}
}
