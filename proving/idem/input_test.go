package idem_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
)

func TestNewRejectsBadOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		d    idem.Dialect
		opt  idem.Option
	}{
		{"nil dialect", nil, nil},
		{"SQL in the table name", idem.Postgres(), idem.WithTable("keys; DROP TABLE orders")},
		{"quoted table name", idem.Postgres(), idem.WithTable(`"keys"`)},
		{"empty table name", idem.Postgres(), idem.WithTable("")},
		{"leading digit", idem.Postgres(), idem.WithTable("1keys")},
		{"three parts", idem.Postgres(), idem.WithTable("a.b.c")},
		{"empty schema", idem.Postgres(), idem.WithTable(".keys")},
		{"long table name", idem.Postgres(), idem.WithTable(strings.Repeat("k", 49))},
		{"zero retention", idem.MySQL(), idem.WithRetention(0)},
		{"negative lock timeout", idem.MySQL(), idem.WithLockTimeout(-time.Second)},
		{"nil clock", idem.SQLite(), idem.WithClock(nil)},
		{"zero response limit", idem.SQLite(), idem.WithMaxResponseBytes(0)},
		{"nil observer", idem.SQLite(), idem.WithObserver(nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := idem.New(c.d, c.opt); !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("New: %v, want ErrInvalidArgument", err)
			}
		})
	}
	for _, name := range []string{"keys", "Keys_2", "billing.idempotency_keys", "_k"} {
		if _, err := idem.New(idem.Postgres(), idem.WithTable(name)); err != nil {
			t.Errorf("WithTable(%q): %v", name, err)
		}
	}
}

func TestBadInputIsAnError(t *testing.T) {
	e := setup(t, dbtest.SQLite(""))
	ctx := context.Background()
	ok := e.Effect("k", dbtest.Created)
	tx := e.Begin(t, nil)
	var zero idem.Store
	var nilStore *idem.Store
	for _, c := range []struct {
		name  string
		store *idem.Store
		tx    *sql.Tx
		key   string
		hash  []byte
		fn    idem.Func
		want  error
	}{
		{"empty key", e.Store, tx, "", dbtest.HashA, ok, idem.ErrInvalidKey},
		{"long key", e.Store, tx, strings.Repeat("k", idem.MaxStoredKeyBytes+1), dbtest.HashA, ok, idem.ErrInvalidKey},
		{"empty hash", e.Store, tx, "k", nil, ok, idem.ErrInvalidHash},
		{"long hash", e.Store, tx, "k", make([]byte, idem.MaxHashBytes+1), ok, idem.ErrInvalidHash},
		{"nil transaction", e.Store, nil, "k", dbtest.HashA, ok, idem.ErrInvalidArgument},
		{"nil Func", e.Store, tx, "k", dbtest.HashA, nil, idem.ErrInvalidArgument},
		{"zero Store", &zero, tx, "k", dbtest.HashA, ok, idem.ErrInvalidArgument},
		{"nil Store", nilStore, tx, "k", dbtest.HashA, ok, idem.ErrInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.store.Do(ctx, c.tx, c.key, c.hash, c.fn); !errors.Is(err, c.want) {
				t.Errorf("Do: %v, want %v", err, c.want)
			}
			if c.tx != nil {
				if _, err := c.store.DoTx(ctx, e.DB, nil, c.key, c.hash, c.fn); !errors.Is(err, c.want) {
					t.Errorf("DoTx: %v, want %v", err, c.want)
				}
			}
		})
	}
	if _, err := e.Store.Do(ctx, tx, "k", dbtest.HashA, func(context.Context, *sql.Tx) (idem.Response, error) {
		return idem.Response{Status: 1 << 40}, nil
	}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Do with a 41-bit status: %v, want ErrInvalidArgument", err)
	}
	if _, err := e.Store.DoTx(ctx, nil, nil, "k", dbtest.HashA, ok); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("DoTx with a nil database: %v", err)
	}
	if _, err := e.Store.Lookup(ctx, e.DB, ""); !errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("Lookup with an empty key: %v", err)
	}
	for _, q := range []idem.Querier{nil, (*sql.DB)(nil), (*sql.Tx)(nil), (*sql.Conn)(nil)} {
		if _, err := e.Store.Lookup(ctx, q, "k"); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Lookup with a nil %T: %v", q, err)
		}
	}
	var nilDB *sql.DB
	for name, call := range map[string]func() error{
		"Purge":                  func() error { _, err := e.Store.Purge(ctx, nilDB, 10); return err },
		"Migrate":                func() error { return e.Store.Migrate(ctx, nilDB) },
		"Settle":                 func() error { return e.Store.Settle(ctx, nilDB, "k", idem.Response{}) },
		"ReleaseWithoutEffect":   func() error { return e.Store.ReleaseWithoutEffect(ctx, nilDB, "k") },
		"Forget":                 func() error { return e.Store.Forget(ctx, nilDB, "k") },
		"Forget on a zero Store": func() error { return zero.Forget(ctx, e.DB, "k") },
	} {
		if err := call(); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s with a nil database: %v", name, err)
		}
	}
	if _, err := zero.Lookup(ctx, e.DB, "k"); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Lookup on a zero Store: %v", err)
	}
	if _, err := e.Store.Purge(ctx, e.DB, 0); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Purge with batch 0: %v", err)
	}
	if err := zero.Migrate(ctx, e.DB); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Migrate on a zero Store: %v", err)
	}
	if zero.Schema() != nil {
		t.Error("Schema on a zero Store is not nil")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Lookup(ctx, e.DB, "k"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("bad input stored a record: Lookup = %v", err)
	}
}

func TestFingerprintFraming(t *testing.T) {
	p := func(s ...string) [][]byte {
		var b [][]byte
		for _, x := range s {
			b = append(b, []byte(x))
		}
		return b
	}
	distinct := [][][]byte{p("ab", "c"), p("a", "bc"), p("abc"), p("abc", ""), p("", "abc"), p(), p("")}
	seen := map[string]int{}
	for i, parts := range distinct {
		h := idem.Fingerprint(parts...)
		if len(h) != 32 {
			t.Fatalf("Fingerprint is %d bytes, want 32", len(h))
		}
		if j, dup := seen[string(h)]; dup {
			t.Errorf("Fingerprint(%q) = Fingerprint(%q)", distinct[i], distinct[j])
		}
		seen[string(h)] = i
	}
	if !bytes.Equal(idem.Fingerprint(p("a", "b")...), idem.Fingerprint(p("a", "b")...)) {
		t.Error("Fingerprint is not deterministic")
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[idem.Outcome]string{
		idem.Claimed: "claimed", idem.Replay: "replay", idem.Mismatch: "mismatch", idem.InFlight: "in flight", 0: "Outcome(0)",
	} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}

func TestEmptyResponseReplays(t *testing.T) {
	e := setup(t, dbtest.SQLite(""))
	empty := idem.Response{Status: 204, Header: http.Header{}}
	res, err := e.Do(t, "k", dbtest.HashA, e.Effect("k", empty), true)
	dbtest.WantOutcome(t, res, err, idem.Claimed)
	res, err = e.Do(t, "k", dbtest.HashA, dbtest.MustNotRun(t), false)
	dbtest.WantOutcome(t, res, err, idem.Replay)
	if res.Response.Status != 204 || res.Response.Header != nil || res.Response.Body == nil || len(res.Response.Body) != 0 {
		t.Errorf("replay of an empty response = %+v, want status 204, nil header, empty body", res.Response)
	}
}

// badStatements is a built-in dialect with its statements, and optionally
// its table, changed.
type badStatements struct {
	idem.Dialect
	change func(*dialect.Statements)
	schema func(string) string // changes each statement of Schema, when set
}

func (d badStatements) Statements(table string, lockTimeout time.Duration) dialect.Statements {
	st := d.Dialect.Statements(table, lockTimeout)
	if d.change != nil {
		d.change(&st)
	}
	return st
}

func (d badStatements) Schema(table string) []string {
	stmts := d.Dialect.Schema(table)
	if d.schema != nil {
		for i := range stmts {
			stmts[i] = d.schema(stmts[i])
		}
	}
	return stmts
}

// Capabilities are the built-in dialect's: the faults are in the SQL.
func (d badStatements) Capabilities() dialect.Capabilities { return dialect.CapabilitiesOf(d.Dialect) }

// TestNewChecksDialectStatements shows that a dialect's mistakes in its SQL
// parameters fail New, as do Run's statements given in part, and that braces
// which are not parameters pass.
func TestNewChecksDialectStatements(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(*dialect.Statements)
		ok      bool
		dialect idem.Dialect // SQLite when nil
	}{
		{"an unknown parameter", func(st *dialect.Statements) { st.Lookup += " AND {nope} = 1" }, false, nil},
		{"a parameter the statement cannot have", func(st *dialect.Statements) { st.Claim = strings.Replace(st.Claim, "{expires_at}", "{limit}", 1) }, false, nil},
		{"a missing statement", func(st *dialect.Statements) { st.Complete = "" }, false, nil},
		{"a brace that is not a parameter", func(st *dialect.Statements) { st.Lookup += " AND '{ x }' <> '{}'" }, true, nil},
		// TiDB's claim is in two statements.
		{"a claim read that cannot tell its own record", func(st *dialect.Statements) {
			st.Claim = strings.Replace(st.Claim, "token = {token}", "0", 1)
		}, false, idem.TiDB()},
		{"a claim write without the key", func(st *dialect.Statements) {
			st.ClaimWrite = strings.Replace(st.ClaimWrite, "{key}", "''", 1)
		}, false, idem.TiDB()},
		// PostgreSQL's claim is read by a second statement when it lost.
		{"a claim lost without the key", func(st *dialect.Statements) {
			st.ClaimLost = strings.ReplaceAll(st.ClaimLost, "{key}", "''")
		}, false, idem.Postgres()},
		{"a claim lost that cannot have a value of the claim", func(st *dialect.Statements) {
			st.ClaimLost += " AND {token} <> 0"
		}, false, idem.Postgres()},
		// A takeover writes an incarnation where the claim does, and only
		// there; a statement that changes no record cannot bind one.
		{"a takeover without the claim's incarnation", func(st *dialect.Statements) {
			st.Takeover = strings.Replace(st.Takeover, "incarnation = {incarnation}, ", "", 1)
		}, false, nil},
		{"an incarnation in the takeover alone", func(st *dialect.Statements) {
			st.Claim = strings.Replace(st.Claim, ", {incarnation})", ", 0)", 1)
		}, false, nil},
		{"no incarnation at all", func(st *dialect.Statements) {
			st.Claim = strings.Replace(st.Claim, ", {incarnation})", ", 0)", 1)
			st.Takeover = strings.Replace(st.Takeover, "incarnation = {incarnation}, ", "", 1)
		}, true, nil},
		{"an incarnation in a statement that creates no record", func(st *dialect.Statements) {
			st.Complete += " AND incarnation <> {incarnation}"
		}, false, nil},
		{"a Run statement that binds the incarnation", func(st *dialect.Statements) {
			st.Run.Takeover += " AND incarnation <> {incarnation}"
		}, false, nil},
		// Run's statements come all or none, Lock and TryLock together.
		{"no Run statements", func(st *dialect.Statements) { st.Run = dialect.RunStatements{} }, true, nil},
		{"some Run statements", func(st *dialect.Statements) { st.Run.Renew = "" }, false, nil},
		{"Lock without TryLock", func(st *dialect.Statements) { st.Run.TryLock = "" }, false, idem.Postgres()},
		{"a Run statement that cannot have a parameter", func(st *dialect.Statements) {
			st.Run.Renew += " AND {status} IS NULL"
		}, false, nil},
	} {
		d := c.dialect
		if d == nil {
			d = idem.SQLite()
		}
		_, err := idem.New(badStatements{Dialect: d, change: c.change})
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, idem.ErrInvalidArgument)) {
			t.Errorf("%s: New = %v, want ok %v or ErrInvalidArgument", c.name, err, c.ok)
		}
	}
}
