package idemhttp_test

import (
	"database/sql"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

func TestOptionsCheckThemselves(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/never-opened.db") // never connected
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	good := []idemhttp.Option{
		idemhttp.KeyHeader("X-Idempotency-Key"),
		idemhttp.Methods("POST", "PUT"),
		idemhttp.Required(),
		idemhttp.Scope(func(*http.Request) (string, error) { return "s", nil }),
		idemhttp.MaxBodyBytes(1),
		idemhttp.StorePolicy(func(int) bool { return true }),
		idemhttp.ReplayHeaders(),
		idemhttp.ReplayHeaders("content-type", "X-Order-Id"),
		idemhttp.RetryAfter(time.Millisecond),
		idemhttp.TxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable}),
		idemhttp.TxOptions(nil),
		idemhttp.ErrorHook(func(*http.Request, error) {}),
		nil,
	}
	if err := idemhttp.Check(store, db, good...); err != nil {
		t.Errorf("Check(good options) = %v", err)
	}

	for _, c := range []struct {
		name  string
		store *idem.Store
		db    *sql.DB
		opt   idemhttp.Option
	}{
		{"nil store", nil, db, nil},
		{"nil database", store, nil, nil},
		{"empty key header", store, db, idemhttp.KeyHeader("")},
		{"key header with a space", store, db, idemhttp.KeyHeader("Idempotency Key")},
		{"no methods", store, db, idemhttp.Methods()},
		{"a method that is not a token", store, db, idemhttp.Methods("POST", "GET /")},
		{"nil scope", store, db, idemhttp.Scope(nil)},
		{"zero body limit", store, db, idemhttp.MaxBodyBytes(0)},
		{"nil store policy", store, db, idemhttp.StorePolicy(nil)},
		{"replaying Set-Cookie", store, db, idemhttp.ReplayHeaders("Content-Type", "set-cookie")},
		{"replaying Authorization", store, db, idemhttp.ReplayHeaders("Authorization")},
		{"replaying a hop-by-hop header", store, db, idemhttp.ReplayHeaders("Transfer-Encoding")},
		{"replaying the replay header", store, db, idemhttp.ReplayHeaders(idemhttp.ReplayedHeader)},
		{"an invalid header name", store, db, idemhttp.ReplayHeaders("Content Type")},
		{"zero retry after", store, db, idemhttp.RetryAfter(0)},
		{"nil error hook", store, db, idemhttp.ErrorHook(nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := idemhttp.Check(c.store, c.db, c.opt)
			if err == nil || !strings.HasPrefix(err.Error(), "idemhttp: ") {
				t.Fatalf("Check = %v, want an idemhttp error", err)
			}

			// The middleware fails closed, and says why.
			var h hook
			mw := idemhttp.New(c.store, c.db, c.opt, h.option())
			ran := false
			next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })
			for _, method := range []string{"POST", "GET"} {
				req, _ := http.NewRequest(method, "/orders", nil)
				req.Header.Set("Idempotency-Key", "k")
				wantProblem(t, serveDirect(mw(next), req), http.StatusInternalServerError, "internal-error", "")
			}
			if ran {
				t.Error("the handler ran behind a bad configuration")
			}
			if errs := h.reported(); len(errs) != 2 || errs[0].Error() != err.Error() {
				t.Errorf("ErrorHook got %v, want %v twice", errs, err)
			}
		})
	}

	t.Run("all problems at once", func(t *testing.T) {
		err := idemhttp.Check(nil, nil, idemhttp.MaxBodyBytes(-1), idemhttp.RetryAfter(-1))
		for _, want := range []string{"nil store", "nil database", "max body bytes", "retry after"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Check = %v, want it to mention %q", err, want)
			}
		}
	})

	t.Run("nil handler", func(t *testing.T) {
		var h hook
		req, _ := http.NewRequest("POST", "/", nil)
		wantProblem(t, serveDirect(idemhttp.New(store, db, h.option())(nil), req), http.StatusInternalServerError, "internal-error", "")
		if errs := h.reported(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "nil handler") {
			t.Errorf("ErrorHook got %v", errs)
		}
	})

	t.Run("DefaultReplayHeaders is a copy", func(t *testing.T) {
		idemhttp.DefaultReplayHeaders()[0] = "Set-Cookie"
		if err := idemhttp.Check(store, db, idemhttp.ReplayHeaders(idemhttp.DefaultReplayHeaders()...)); err != nil {
			t.Error(err)
		}
	})
}
