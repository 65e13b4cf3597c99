package idemhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// hostileCase is a request that the middleware must refuse with a problem
// before anything is stored.
type hostileCase struct {
	name string
	// key is the key header's values, sent as they are.
	key []string
	// tenant is the X-Tenant header; "" makes the scope function fail.
	tenant string
	body   string
	// direct calls the handler without a network in between, for a
	// request that net/http's client refuses to send.
	direct bool
	status int
	kind   string
}

// TestHostileRequests sends keys and bodies that a careless or hostile
// client could send: each must get its 4xx with its problem type, the
// handler must not run, and neither a record nor an effect may be stored.
// The other hostile cases are covered elsewhere: only spaces and a repeated
// header by TestMalformedKeysAre400 ("blank", "two header lines"), a body
// one byte over a small limit and at it by TestRequestBody, and a scope
// function that fails by TestScopesDoNotMeet; the cases here add what those
// do not check, such as the count of stored records.
func TestHostileRequests(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		var h hook
		tenant := func(r *http.Request) (string, error) {
			if v := r.Header.Get("X-Tenant"); v != "" {
				return v, nil
			}
			return "", errors.New("no tenant")
		}
		mw := e.protectScoped(t, tenant, h.option())
		handler := mw(e.orders())
		srv := start(t, handler)

		limit := strings.Repeat("b", idemhttp.DefaultMaxBodyBytes)
		for _, c := range []hostileCase{
			{name: "a NUL byte", key: []string{"ab\x00cd"}, direct: true, status: 400, kind: "invalid-key"},
			{name: "a quoted NUL byte", key: []string{"\"ab\x00cd\""}, direct: true, status: 400, kind: "invalid-key"},
			{name: "only a NUL byte", key: []string{"\x00"}, direct: true, status: 400, kind: "invalid-key"},
			{name: "CR LF", key: []string{"ab\r\nX-Injected: 1"}, direct: true, status: 400, kind: "invalid-key"},
			{name: "invalid UTF-8", key: []string{"ab\xff\xfecd"}, status: 400, kind: "invalid-key"},
			{name: "invalid UTF-8, quoted", key: []string{"\"\xc3\x28\""}, status: 400, kind: "invalid-key"},
			{name: "a lone UTF-8 continuation byte", key: []string{"\x80"}, status: 400, kind: "invalid-key"},
			{name: "10,000 characters", key: []string{strings.Repeat("k", 10000)}, status: 400, kind: "invalid-key"},
			{name: "10,000 characters, quoted", key: []string{`"` + strings.Repeat("k", 10000) + `"`}, status: 400, kind: "invalid-key"},
			{name: "10,000 escapes", key: []string{`"` + strings.Repeat(`\\`, 10000) + `"`}, status: 400, kind: "invalid-key"},
			{name: "only spaces, 300 of them", key: []string{strings.Repeat(" ", 300)}, direct: true, status: 400, kind: "invalid-key"},
			{name: "the same key twice", key: []string{"k", "k"}, status: 400, kind: "invalid-key"},
			{name: "two keys", key: []string{"k", "other"}, status: 400, kind: "invalid-key"},
			{name: "a valid and a malformed key", key: []string{"k", "ab\xff"}, status: 400, kind: "invalid-key"},
			{name: "the body one byte over the default limit", key: []string{"big"}, body: limit + "b", status: 413, kind: "body-too-large"},
			{name: "the scope function fails", key: []string{"k"}, tenant: "", body: "book", status: 403, kind: "client-unknown"},
		} {
			if c.tenant == "" && c.kind != "client-unknown" {
				c.tenant = "acme"
			}
			t.Run(c.name, func(t *testing.T) {
				hdr := http.Header{"Idempotency-Key": c.key}
				if c.tenant != "" {
					hdr.Set("X-Tenant", c.tenant)
				}
				if c.kind == "body-too-large" {
					// A client that sends a large body asks first, as it
					// should: the refusal comes before the body, which
					// the server would otherwise cut off half sent.
					hdr.Set("Expect", "100-continue")
				}
				var rep reply
				if c.direct {
					req, err := http.NewRequest("POST", "/orders", strings.NewReader(c.body))
					if err != nil {
						t.Fatal(err)
					}
					req.Header = hdr
					rep = serveDirect(handler, req)
				} else {
					rep = sendHeader(t, srv, "POST", "/orders", hdr, strings.NewReader(c.body))
				}
				wantProblem(t, rep, c.status, c.kind, "")
				wantNothingStored(t, e, c.tenant, c.key)
			})
		}

		t.Run("the body one byte over the default limit, without a length", func(t *testing.T) {
			hdr := http.Header{"Idempotency-Key": {"big-chunked"}, "X-Tenant": {"acme"}}
			rep := sendHeader(t, srv, "POST", "/orders", hdr, io.MultiReader(strings.NewReader(limit+"b")))
			wantProblem(t, rep, http.StatusRequestEntityTooLarge, "body-too-large", "")
			wantNothingStored(t, e, "acme", []string{"big-chunked"})
		})

		t.Run("a NUL byte over TCP never reaches the middleware", func(t *testing.T) {
			// net/http's server refuses a header value with a control
			// character itself, before any handler runs.
			if status := rawPost(t, srv.Listener.Addr().String(), "ab\x00cd", "acme", "book"); status != http.StatusBadRequest {
				t.Errorf("status = %d, want 400 from net/http", status)
			}
			wantNothingStored(t, e, "acme", []string{"ab\x00cd"})
		})

		if n := e.runs.Load(); n != 0 {
			t.Errorf("the handler ran %d times, want 0", n)
		}
		if errs := h.reported(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "no tenant") {
			t.Errorf("ErrorHook got %v, want the one failure of the scope function", errs)
		}

		t.Run("the body at the default limit is accepted", func(t *testing.T) {
			// The effect notes the body's length: a whole MiB would not
			// fit in MariaDB's TEXT column.
			fits := start(t, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err == nil {
					err = e.insert(r.Context(), idemhttp.Tx(r.Context()), fmt.Sprint(len(b)))
				}
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, "read %d bytes", len(b))
			})))
			hdr := http.Header{"Idempotency-Key": {"fits"}, "X-Tenant": {"acme"}}
			first := sendHeader(t, fits, "POST", "/orders", hdr, strings.NewReader(limit))
			want := fmt.Sprintf("read %d bytes", len(limit))
			if first.status != http.StatusCreated || string(first.body) != want {
				t.Fatalf("got %d %q, want 201 %q", first.status, first.body, want)
			}
			again := sendHeader(t, fits, "POST", "/orders", hdr, strings.NewReader(limit))
			if again.status != http.StatusCreated || string(again.body) != want || again.header.Get(idemhttp.ReplayedHeader) != "true" {
				t.Errorf("retry = %d %q, %s %q; want the replay of the first", again.status, again.body,
					idemhttp.ReplayedHeader, again.header.Get(idemhttp.ReplayedHeader))
			}
			if n := storedRecords(t, e); n != 1 {
				t.Errorf("%d records, want 1", n)
			}
			if n := e.Effects.Total(t); n != 1 {
				t.Errorf("%d effect rows, want 1", n)
			}
		})
	})
}

// TestCorruptRecordIs500 damages a stored response: its retries must get a
// 500 record-damaged, never the damaged bytes, and the handler must not run again, since
// the record still says that the work was done.
func TestCorruptRecordIs500(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		var h hook
		srv := e.serve(t, e.orders(), h.option())
		wantRan(t, send(t, srv, "POST", "/orders", "k", "book"), http.StatusCreated, 1)
		if _, err := e.DB.ExecContext(context.Background(), "UPDATE "+e.Table+" SET body = "+tg.Dialect.Placeholder(1), []byte(`{"order":2}`)); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			rep := send(t, srv, "POST", "/orders", "k", "book")
			wantProblem(t, rep, http.StatusInternalServerError, "record-damaged", "")
			if strings.Contains(string(rep.body), "order") {
				t.Errorf("the 500 carries the damaged response: %s", rep.body)
			}
		}
		if errs := h.reported(); len(errs) != 2 || !errors.Is(errs[0], idem.ErrCorruptRecord) || !errors.Is(errs[1], idem.ErrCorruptRecord) {
			t.Errorf("ErrorHook got %v, want ErrCorruptRecord twice", errs)
		}
		if n := e.runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if n := e.Effects.Total(t); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

// wantNothingStored fails the test if the store's table or the effect table
// has a row, or if the key the request would have been stored under has a
// record.
func wantNothingStored(t *testing.T, e *env, scope string, key []string) {
	t.Helper()
	if n := storedRecords(t, e); n != 0 {
		t.Errorf("%d records stored, want 0", n)
	}
	if n := e.Effects.Total(t); n != 0 {
		t.Errorf("%d effect rows, want 0", n)
	}
	for _, k := range key {
		// A key too long for the store cannot have a record at all.
		res, err := e.lookup(t, scope, k)
		if !errors.Is(err, idem.ErrNotFound) && !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("Lookup(StoredKey(%q, %.20q)) = %v, %v; want no record", scope, k, res.Outcome, err)
		}
	}
}

// storedRecords counts the rows of e's store table.
func storedRecords(t *testing.T, e *env) int {
	t.Helper()
	var n int
	if err := e.DB.QueryRowContext(context.Background(), "SELECT count(*) FROM "+e.Table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// rawPost writes a POST with the key header byte for byte to addr, which
// net/http's client would refuse to send, and returns the response status.
func rawPost(t *testing.T, addr, key, tenant, body string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A connection on loopback and one short exchange take milliseconds,
	// even on a loaded machine. The 5 s and 10 s only turn a server that
	// never answers into a failure instead of a hang.
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req := fmt.Sprintf("POST /orders HTTP/1.1\r\nHost: %s\r\nIdempotency-Key: %s\r\nX-Tenant: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		addr, key, tenant, len(body), body)
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
