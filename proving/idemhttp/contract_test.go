package idemhttp_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// problemOf decodes a default problem body.
func problemOf(t *testing.T, rep reply) idemhttp.Problem {
	t.Helper()
	var p idemhttp.Problem
	if err := json.Unmarshal(rep.body, &p); err != nil {
		t.Fatalf("problem body %q: %v", rep.body, err)
	}
	return p
}

func TestProblemTypeBase(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db := neverOpened(t)
	single := idemhttp.WithSingleClient()
	for _, bad := range []string{"", "/problems/", "problems#", "https://api.example.com/problems", "http://[::1/"} {
		if _, err := idemhttp.New(store, db, nil, single, idemhttp.WithProblemTypeBase(bad)); err == nil || !strings.Contains(err.Error(), "problem type base") {
			t.Errorf("WithProblemTypeBase(%q): %v, want it refused", bad, err)
		}
	}
	for _, base := range []string{"https://api.example.com/problems/", "https://api.example.com/errors#", "urn:example:problem:", "https://api.example.com/errors?type="} {
		mw := mustNew(t, store, db, single, idemhttp.WithProblemTypeBase(base))
		rep := serveDirect(mw.Handler(http.NotFoundHandler()), httptestRequest(`"open`, ""))
		if p := problemOf(t, rep); rep.status != http.StatusBadRequest || p.Type != base+"invalid-key" {
			t.Errorf("base %s: %d %+v, want 400 of type %sinvalid-key", base, rep.status, p, base)
		}
	}
	t.Run("the default links to docs/http.md", func(t *testing.T) {
		mw := mustNew(t, store, db, single)
		rep := serveDirect(mw.Handler(http.NotFoundHandler()), httptestRequest(`"open`, ""))
		wantProblem(t, rep, http.StatusBadRequest, "invalid-key", "")
		if idemhttp.DefaultProblemTypeBase != problemTypes {
			t.Errorf("DefaultProblemTypeBase = %q, want %q", idemhttp.DefaultProblemTypeBase, problemTypes)
		}
	})
}

// apiError is the error format of an API that is not RFC 9457's.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Doc     string `json:"doc"`
	} `json:"error"`
}

func writeAPIError(w http.ResponseWriter, _ *http.Request, p idemhttp.Problem) {
	var e apiError
	e.Error.Code, e.Error.Message, e.Error.Doc = p.Slug, p.Detail, p.Type
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(e)
}

func TestErrorWriter(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		base := "https://api.example.com/errors/"
		srv := e.serve(t, e.orders(), idemhttp.WithErrorWriter(writeAPIError), idemhttp.WithProblemTypeBase(base))
		wantRan(t, send(t, srv, "POST", "/orders", "k", "book"), http.StatusCreated, 1)
		for _, c := range []struct {
			name, key, body string
			status          int
			code            string
		}{
			{"a mismatch", "k", "lamp", http.StatusUnprocessableEntity, "key-reused"},
			{"a malformed key", `"open`, "book", http.StatusBadRequest, "invalid-key"},
		} {
			t.Run(c.name, func(t *testing.T) {
				rep := send(t, srv, "POST", "/orders", c.key, c.body)
				var got apiError
				if err := json.Unmarshal(rep.body, &got); err != nil {
					t.Fatalf("body %q: %v", rep.body, err)
				}
				if rep.status != c.status || got.Error.Code != c.code || got.Error.Doc != base+c.code || got.Error.Message == "" {
					t.Errorf("got %d %+v, want %d with code %s", rep.status, got, c.status, c.code)
				}
				if rep.header.Get("Content-Type") != "application/json" || rep.header.Get("Cache-Control") != "no-store" {
					t.Errorf("headers %v, want the writer's Content-Type and no-store", rep.header)
				}
			})
		}
	})

	t.Run("a writer that writes nothing", func(t *testing.T) {
		store, err := idem.New(idem.SQLite())
		if err != nil {
			t.Fatal(err)
		}
		mw := mustNew(t, store, neverOpened(t), idemhttp.WithSingleClient(), idemhttp.WithKeyRequired(),
			idemhttp.WithErrorWriter(func(http.ResponseWriter, *http.Request, idemhttp.Problem) {}))
		rep := serveDirect(mw.Handler(http.NotFoundHandler()), httptestRequest("", ""))
		if rep.status != http.StatusBadRequest || len(rep.body) != 0 {
			t.Errorf("got %d %q, want the problem's 400 with no body", rep.status, rep.body)
		}
	})

	t.Run("a nil handler", func(t *testing.T) {
		store, err := idem.New(idem.SQLite())
		if err != nil {
			t.Fatal(err)
		}
		mw := mustNew(t, store, neverOpened(t), idemhttp.WithSingleClient(), idemhttp.WithErrorWriter(writeAPIError))
		rep := serveDirect(mw.Handler(nil), httptestRequest("k", ""))
		var got apiError
		if err := json.Unmarshal(rep.body, &got); err != nil || rep.status != http.StatusInternalServerError || got.Error.Code != "internal-error" {
			t.Errorf("got %d %q, %v; want the writer's internal-error", rep.status, rep.body, err)
		}
	})
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// errNotUUID is written for the client, as WithKeyValidator asks.
var errNotUUID = errors.New("a key is a random UUID, version 4, in lower case")

func validUUID(key string) error {
	if !uuidRE.MatchString(key) {
		return errNotUUID
	}
	return nil
}

func TestKeyValidator(t *testing.T) {
	t.Run("a refused key costs nothing", func(t *testing.T) {
		store, err := idem.New(idem.SQLite())
		if err != nil {
			t.Fatal(err)
		}
		file := t.TempDir() + "/must-not-exist.db"
		db := openUntouched(t, file)
		scoped := false
		mw := mustNew(t, store, db, idemhttp.WithKeyValidator(validUUID),
			idemhttp.WithScope(func(*http.Request) (string, error) { scoped = true; return "acme", nil }))
		ran := false
		h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		rep := serveDirect(h, httptestRequest("order-1", "book"))
		wantProblem(t, rep, http.StatusBadRequest, "invalid-key", "")
		if p := problemOf(t, rep); !strings.Contains(p.Detail, errNotUUID.Error()) {
			t.Errorf("detail %q, want the validator's reason", p.Detail)
		}
		if scoped || ran {
			t.Errorf("scope called: %v, handler ran: %v; want neither", scoped, ran)
		}
		if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the database file: %v; want it never created", err)
		}
		_, _, err = mw.Identify(httptestRequest("order-1", "book"))
		if !errors.Is(err, errNotUUID) || !strings.Contains(err.Error(), "malformed idempotency key") {
			t.Errorf("Identify: %v, want the validator's error", err)
		}
		// The validator sees the key unquoted, after the middleware's own
		// rule, which still applies first.
		if _, _, err := mw.Identify(httptestRequest(`"4f9c2b7e-0d1a-4b6c-9e2f-1a2b3c4d5e6f"`, "")); err != nil {
			t.Errorf("Identify(a quoted UUID): %v", err)
		}
		wantProblem(t, serveDirect(h, httptestRequest(`"open`, "")), http.StatusBadRequest, "invalid-key", "")
	})

	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		srv := e.serve(t, e.orders(), idemhttp.WithKeyValidator(validUUID))
		key := "4f9c2b7e-0d1a-4b6c-9e2f-1a2b3c4d5e6f"
		first := send(t, srv, "POST", "/orders", key, "book")
		wantRan(t, first, http.StatusCreated, 1)
		wantReplay(t, send(t, srv, "POST", "/orders", key, "book"), first)
		wantProblem(t, send(t, srv, "POST", "/orders", strings.ToUpper(key), "book"), http.StatusBadRequest, "invalid-key", "")
		e.wantNoRecord(t, "", strings.ToUpper(key))
	})
}

// openUntouched opens a SQLite handle on file without connecting: the file
// exists only once something uses the database.
func openUntouched(t *testing.T, file string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// withoutSentAt is a JSON canonicalizer: the body re-encoded without its
// "sent_at" field, which the client sets anew on each attempt, and with its
// keys in order and no spacing, as encoding/json writes a map. Its errors
// are written for the client.
func withoutSentAt(contentType string, body []byte) ([]byte, error) {
	if contentType != "application/json" {
		return nil, fmt.Errorf("the body must be application/json, not %q", contentType)
	}
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("the body is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the body holds more than one JSON value")
	}
	delete(v, "sent_at")
	return json.Marshal(v)
}

func TestBodyCanonicalizer(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		opt := idemhttp.WithBodyCanonicalizer(withoutSentAt)
		srv := e.serve(t, e.orders(), opt)
		post := func(key, body string) reply {
			h := keyHeader(key)
			h.Set("Content-Type", "application/json")
			return sendHeader(t, srv, "POST", "/orders", h, strings.NewReader(body))
		}
		sent := `{"item":"book","qty":1,"sent_at":"2026-01-02T03:04:05Z"}`
		first := post("k", sent)
		wantRan(t, first, http.StatusCreated, 1)
		// The handler reads the body as sent, not the canonical form.
		if !bytes.Contains(first.body, []byte(`sent_at`)) {
			t.Errorf("the handler got %q, want the body as sent", first.body)
		}
		wantReplay(t, post("k", `{"sent_at":"2026-01-02T03:04:09Z", "qty":1, "item":"book"}`), first)
		wantReplay(t, post("k", `{"item":"book","qty":1}`), first)
		wantProblem(t, post("k", `{"item":"lamp","qty":1,"sent_at":"2026-01-02T03:04:05Z"}`), http.StatusUnprocessableEntity, "key-reused", "")

		rep := post("k2", `{"item":`)
		wantProblem(t, rep, http.StatusBadRequest, "body-invalid", "")
		if p := problemOf(t, rep); !strings.Contains(p.Detail, "the body is not a JSON object.") {
			t.Errorf("detail %q, want the canonicalizer's reason", p.Detail)
		}
		e.wantNoRecord(t, "", "k2")
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}

		t.Run("Identify hashes the canonical body", func(t *testing.T) {
			mw := mustNew(t, e.Store, e.DB, idemhttp.WithSingleClient(), opt)
			identify := func(body string) ([]byte, error) {
				r := httptestRequest("k", body)
				r.Header.Set("Content-Type", "application/json")
				_, hash, err := mw.Identify(r)
				if err == nil {
					if b, _ := io.ReadAll(r.Body); string(b) != body {
						t.Errorf("the body after Identify reads %q, want %q", b, body)
					}
				}
				return hash, err
			}
			a, errA := identify(`{"item":"book","sent_at":"1"}`)
			b, errB := identify(`{"sent_at":"2","item":"book"}`)
			if errA != nil || errB != nil || !bytes.Equal(a, b) {
				t.Errorf("hashes %x, %v and %x, %v; want one hash", a, errA, b, errB)
			}
			canonical, _ := withoutSentAt("application/json", []byte(`{"item":"book"}`))
			want := idem.Fingerprint([]byte("idemhttp/1"), nil, []byte("POST"), []byte("/orders"), nil, canonical)
			if !bytes.Equal(a, want) {
				t.Errorf("hash %x, want the documented formula over the canonical body, %x", a, want)
			}
			if _, err := identify(`[`); err == nil || !strings.Contains(err.Error(), "body canonicalizer") {
				t.Errorf("Identify(a bad body): %v, want the canonicalizer's error", err)
			}
		})
	})
}
