package idemhttp_test

import (
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

func TestNewChecksTheConfiguration(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/never-opened.db") // never connected
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	scope := idemhttp.WithScope(func(*http.Request) (string, error) { return "s", nil })

	good := []idemhttp.Option{
		idemhttp.WithKeyHeader("X-Idempotency-Key"),
		idemhttp.WithMethods("POST", "PUT"),
		idemhttp.WithKeyRequired(),
		scope,
		idemhttp.WithMaxBodyBytes(1),
		idemhttp.WithStorePolicy(func(int) bool { return true }),
		idemhttp.WithReplayHeaders(),
		idemhttp.WithReplayHeaders("content-type", "X-Order-Id"),
		idemhttp.WithRetryAfter(time.Millisecond),
		idemhttp.WithErrorHook(func(*http.Request, error) {}),
		idemhttp.WithProblemTypeBase("https://api.example.com/problems/"),
		idemhttp.WithErrorWriter(func(http.ResponseWriter, *http.Request, idemhttp.Problem) {}),
		idemhttp.WithKeyValidator(func(string) error { return nil }),
		idemhttp.WithBodyCanonicalizer(func(_ string, b []byte) ([]byte, error) { return b, nil }),
		nil,
	}
	if mw, err := idemhttp.New(store, db, &sql.TxOptions{Isolation: sql.LevelSerializable}, good...); err != nil || mw == nil {
		t.Errorf("New(good options) = %v, %v", mw, err)
	}
	if mw, err := idemhttp.New(store, db, nil, idemhttp.WithSingleClient()); err != nil || mw == nil {
		t.Errorf("New(WithSingleClient()) = %v, %v", mw, err)
	}

	single := idemhttp.WithSingleClient()
	for _, c := range []struct {
		name  string
		store *idem.Store
		db    *sql.DB
		opts  []idemhttp.Option
		want  string // in the error
	}{
		{"nil store", nil, db, []idemhttp.Option{single}, "nil store"},
		{"a store not made by idem.New", &idem.Store{}, db, []idemhttp.Option{single}, "not made by idem.New"},
		{"nil database", store, nil, []idemhttp.Option{single}, "nil database"},
		{"empty key header", store, db, []idemhttp.Option{single, idemhttp.WithKeyHeader("")}, "key header"},
		{"key header with a space", store, db, []idemhttp.Option{single, idemhttp.WithKeyHeader("Idempotency Key")}, "key header"},
		{"no methods", store, db, []idemhttp.Option{single, idemhttp.WithMethods()}, "no methods"},
		{"a method that is not a token", store, db, []idemhttp.Option{single, idemhttp.WithMethods("POST", "GET /")}, "not a token"},
		{"nil scope", store, db, []idemhttp.Option{idemhttp.WithScope(nil)}, "nil scope function"},
		{"zero body limit", store, db, []idemhttp.Option{single, idemhttp.WithMaxBodyBytes(0)}, "max body bytes"},
		{"nil store policy", store, db, []idemhttp.Option{single, idemhttp.WithStorePolicy(nil)}, "nil store policy"},
		{"replaying Set-Cookie", store, db, []idemhttp.Option{single, idemhttp.WithReplayHeaders("Content-Type", "set-cookie")}, "Set-Cookie"},
		{"replaying Authorization", store, db, []idemhttp.Option{single, idemhttp.WithReplayHeaders("Authorization")}, "Authorization"},
		{"replaying a hop-by-hop header", store, db, []idemhttp.Option{single, idemhttp.WithReplayHeaders("Transfer-Encoding")}, "Transfer-Encoding"},
		{"replaying the replay header", store, db, []idemhttp.Option{single, idemhttp.WithReplayHeaders(idemhttp.ReplayedHeader)}, idemhttp.ReplayedHeader},
		{"an invalid header name", store, db, []idemhttp.Option{single, idemhttp.WithReplayHeaders("Content Type")}, "not a valid header name"},
		{"zero retry after", store, db, []idemhttp.Option{single, idemhttp.WithRetryAfter(0)}, "retry after"},
		{"nil error hook", store, db, []idemhttp.Option{single, idemhttp.WithErrorHook(nil)}, "nil error hook"},
		{"a relative problem type base", store, db, []idemhttp.Option{single, idemhttp.WithProblemTypeBase("/problems/")}, "absolute URI"},
		{"a problem type base without a separator", store, db, []idemhttp.Option{single, idemhttp.WithProblemTypeBase("https://api.example.com/problems")}, "must end with"},
		{"nil error writer", store, db, []idemhttp.Option{single, idemhttp.WithErrorWriter(nil)}, "nil error writer"},
		{"nil key validator", store, db, []idemhttp.Option{single, idemhttp.WithKeyValidator(nil)}, "nil key validator"},
		{"nil body canonicalizer", store, db, []idemhttp.Option{single, idemhttp.WithBodyCanonicalizer(nil)}, "nil body canonicalizer"},
		{"neither scope nor single client", store, db, nil, "choose"},
		{"a scope and single client", store, db, []idemhttp.Option{scope, single}, "choose"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mw, err := idemhttp.New(c.store, c.db, nil, c.opts...)
			if err == nil || mw != nil {
				t.Fatalf("New = %v, %v; want an error and no middleware", mw, err)
			}
			if !strings.HasPrefix(err.Error(), "idemhttp: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: %q, want an idemhttp error that says %q", err, c.want)
			}
			if n := strings.Count(err.Error(), "idemhttp: "); n != 1 {
				t.Errorf("New: %q holds %d errors, want 1", err, n)
			}
			// One error per case: errors.Is sees this case's, not another's.
			if !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("New: %q does not wrap idem.ErrInvalidArgument", err)
			}
		})
	}

	t.Run("the scope error says what to choose and why", func(t *testing.T) {
		_, err := idemhttp.New(store, db, nil)
		for _, want := range []string{"WithScope(fn)", "WithSingleClient()", "IETF draft", "global", "each other's responses"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("New: %v, want it to say %q", err, want)
			}
		}
	})

	t.Run("all problems at once", func(t *testing.T) {
		_, err := idemhttp.New(nil, nil, nil, idemhttp.WithMaxBodyBytes(-1), idemhttp.WithRetryAfter(-1))
		for _, want := range []string{"nil store", "nil database", "max body bytes", "retry after", "choose"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("New = %v, want it to mention %q", err, want)
			}
		}
	})

	t.Run("DefaultReplayHeaders is a copy", func(t *testing.T) {
		idemhttp.DefaultReplayHeaders()[0] = "Set-Cookie"
		if _, err := idemhttp.New(store, db, nil, single, idemhttp.WithReplayHeaders(idemhttp.DefaultReplayHeaders()...)); err != nil {
			t.Error(err)
		}
	})
}

// TestHandlerFailsClosed checks what Handler does where it cannot return an
// error: a nil handler, or a Middleware that New did not return. Every
// request, protected or not, gets a 500 problem, the error hook is told why
// when there is one, and nothing runs or panics.
func TestHandlerFailsClosed(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/never-opened.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ran := false
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })
	serveAll := func(t *testing.T, h http.Handler) {
		t.Helper()
		for _, method := range []string{"POST", "GET"} {
			req, _ := http.NewRequest(method, "/orders", nil)
			req.Header.Set("Idempotency-Key", "k")
			wantProblem(t, serveDirect(h, req), http.StatusInternalServerError, "internal-error", "")
		}
	}

	t.Run("a nil handler", func(t *testing.T) {
		var h hook
		mw := mustNew(t, store, db, idemhttp.WithSingleClient(), h.option())
		serveAll(t, mw.Handler(nil))
		if errs := h.reported(); len(errs) != 2 || !strings.Contains(errs[0].Error(), "nil handler") {
			t.Errorf("the error hook got %v, want the nil handler twice", errs)
		}
	})
	t.Run("a nil Middleware", func(t *testing.T) {
		var mw *idemhttp.Middleware // as New returns it with an error
		serveAll(t, mw.Handler(next))
		if _, _, err := mw.Identify(httptestRequest("k", "")); !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), "nil Middleware") {
			t.Errorf("Identify: %v, want the nil Middleware refused", err)
		}
	})
	t.Run("a zero Middleware", func(t *testing.T) {
		mw := &idemhttp.Middleware{}
		serveAll(t, mw.Handler(next))
		if _, _, err := mw.Identify(httptestRequest("k", "")); !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), "not made by New") {
			t.Errorf("Identify: %v, want the zero Middleware refused", err)
		}
	})
	if ran {
		t.Error("the handler ran behind a Middleware that cannot serve")
	}
}
