package idem_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/proving/dbtest"
	"github.com/idemgo/idem/proving/fault"
)

// stmtCounter notes every statement the connections of a database send, by the
// Store's statement name, "effect" for the test's own insert, or "other",
// and every one of the Store's statements that the driver had to prepare
// apart from running it (a round trip more).
type stmtCounter struct {
	mu       sync.Mutex
	names    map[string]string // SQL text to name
	seen     []string
	prepared int
}

func (c *stmtCounter) name(query string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.names[query]; ok {
		return n
	}
	return "other"
}

// nameStatements names store's statements by their SQL text.
func (c *stmtCounter) nameStatements(store *idem.Store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, q := range store.Queries() {
		c.names[q.SQL] = name
	}
}

// countStatements sets up tg with every connection counted by the returned
// counter, which names the store's statements and the effect's insert.
func countStatements(t *testing.T, tg target) (*env, *stmtCounter) {
	c := &stmtCounter{names: map[string]string{}}
	tg.Wrap = func(base driver.Driver, dsn string) driver.Connector {
		return stmtCountingConnector{base: base, dsn: dsn, c: c}
	}
	e := setup(t, tg)
	c.nameStatements(e.Store)
	c.mu.Lock()
	c.names[e.Effects.InsertSQL()] = "effect"
	c.mu.Unlock()
	return e, c
}

func (c *stmtCounter) note(query string) {
	n := c.name(query)
	c.mu.Lock()
	c.seen = append(c.seen, n)
	c.mu.Unlock()
}

// notePrepare counts a separate prepare of one of the Store's statements.
func (c *stmtCounter) notePrepare(query string) {
	if n := c.name(query); n == "effect" || n == "other" {
		return
	}
	c.mu.Lock()
	c.prepared++
	c.mu.Unlock()
}

// take returns the statements and separate prepares noted since the last call.
func (c *stmtCounter) take() ([]string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen, prepared := c.seen, c.prepared
	c.seen, c.prepared = nil, 0
	return seen, prepared
}

// stmtCountingConnector opens connections of a driver that report to c.
type stmtCountingConnector struct {
	base driver.Driver
	dsn  string
	c    *stmtCounter
}

func (cc stmtCountingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := cc.base.Open(cc.dsn)
	if err != nil {
		return nil, err
	}
	return &stmtCountingConn{conn.(fault.Conn), cc.c}, nil
}

func (cc stmtCountingConnector) Driver() driver.Driver { return cc.base }

type stmtCountingConn struct {
	fault.Conn
	c *stmtCounter
}

// A driver that cannot send a statement with its arguments in one go
// answers driver.ErrSkip, and database/sql prepares it instead: that
// statement is counted when the prepared statement runs.
func (c *stmtCountingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.Conn.QueryContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.c.note(query)
	}
	return rows, err
}

func (c *stmtCountingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.ExecContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.c.note(query)
	}
	return r, err
}

// BeginTx notes a transaction as "begin".
func (c *stmtCountingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.c.mu.Lock()
	c.c.seen = append(c.c.seen, "begin")
	c.c.mu.Unlock()
	return c.Conn.BeginTx(ctx, opts)
}

func (c *stmtCountingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *stmtCountingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		st  driver.Stmt
		err error
	)
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	c.c.notePrepare(query)
	return &stmtCountingStmt{st, query, c.c}, nil
}

type stmtCountingStmt struct {
	driver.Stmt
	query string
	c     *stmtCounter
}

func (s *stmtCountingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.note(s.query)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return nil, errors.New("counting driver: statement has no ExecContext")
}

func (s *stmtCountingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.note(s.query)
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return nil, errors.New("counting driver: statement has no QueryContext")
}

// TestStatementsPerCall counts the statements that one Do sends for each
// outcome, on every database: they are the whole cost of a key, and
// docs/performance.md accounts for them. Begin, commit and the effect are
// the caller's and are not counted.
func TestStatementsPerCall(t *testing.T) {
	// What each dialect sends, by outcome.
	want := map[string]map[string][]string{
		// The claim returns a row only when it wrote one; the statement
		// after it reads the record, the next, when that is not live,
		// tells a held key from a free one, and a takeover replaces an
		// expired record.
		"postgres": {
			"claimed":  {"Claim", "Complete"},
			"replay":   {"Claim", "ClaimLost"},
			"mismatch": {"Claim", "ClaimLost"},
			"expired":  {"Claim", "ClaimLost", "ClaimHeld", "Takeover", "Complete"},
		},
		"mariadb": {
			"claimed":  {"Claim", "Complete"},
			"replay":   {"Claim"},
			"mismatch": {"Claim"},
			"expired":  {"Claim", "Takeover", "Complete"},
		},
		// One CALL of the claim's procedure, which sends a row only
		// when it lost, and takes over an expired record itself.
		"mysql": {
			"claimed":  {"Claim", "Complete"},
			"replay":   {"Claim"},
			"mismatch": {"Claim"},
			"expired":  {"Claim", "Complete"},
		},
		// No RETURNING: the claim writes, then reads what it wrote.
		"tidb": {
			"claimed":  append(claimStatements(idem.TiDB()), "Complete"),
			"replay":   claimStatements(idem.TiDB()),
			"mismatch": claimStatements(idem.TiDB()),
			"expired":  append(claimStatements(idem.TiDB()), "Complete"),
		},
		"sqlite": {
			"claimed": {"Claim", "Complete"},
			// The claim returns a row only when it wrote one.
			"replay":   {"Claim", "Lookup"},
			"mismatch": {"Claim", "Lookup"},
			"expired":  {"Claim", "Lookup", "Takeover", "Complete"},
		},
	}
	dbtest.ForEachWithTiDB(t, func(t *testing.T, tg target) {
		e, c := countStatements(t, tg)
		// A second store on the same table, a retention window later, for
		// which every record the first one wrote has expired.
		later, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithClock(func() time.Time {
			return time.Now().Add(25 * time.Hour)
		}))
		if err != nil {
			t.Fatal(err)
		}

		ctx := context.Background()
		for _, step := range []struct {
			name  string
			store *idem.Store
			hash  []byte
			want  idem.Outcome
		}{
			{"claimed", e.Store, dbtest.HashA, idem.Claimed},
			{"replay", e.Store, dbtest.HashA, idem.Replay},
			{"mismatch", e.Store, dbtest.HashB, idem.Mismatch},
			{"expired", later, dbtest.HashB, idem.Claimed},
		} {
			tx, err := e.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.take()
			res, err := step.store.Do(ctx, tx, "k", step.hash, e.Effect("k", dbtest.Created))
			seen, prepared := c.take()
			if err != nil {
				_ = tx.Rollback()
				t.Fatalf("%s: %v", step.name, err)
			}
			if res.Outcome == idem.Claimed {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != step.want {
				t.Fatalf("%s: outcome %v, want %v", step.name, res.Outcome, step.want)
			}
			var stmts []string
			for _, s := range seen {
				if s != "effect" {
					stmts = append(stmts, s)
				}
			}
			if w := want[tg.Dialect.Name()][step.name]; !reflect.DeepEqual(stmts, w) {
				t.Errorf("%s: Do sent %v, want %v", step.name, stmts, w)
			}
			// A round trip per statement, and one more for each that the
			// driver prepares apart: go-sql-driver/mysql does so for every
			// statement with arguments unless the DSN sets
			// interpolateParams, and every statement of idem's has some.
			wantPrepared := 0
			if tg.Family == "mysql" && !strings.Contains(tg.Name, "interpolate") {
				wantPrepared = len(stmts)
			}
			if prepared != wantPrepared {
				t.Errorf("%s: %d statements prepared apart, want %d", step.name, prepared, wantPrepared)
			}
			t.Logf("%-8s %d statements %v, %d round trips", step.name, len(stmts), stmts, len(stmts)+prepared)
		}
	})
}

// claimStatements are the statements of a claim that wins.
func claimStatements(d idem.Dialect) []string {
	if d.Name() == "tidb" {
		return []string{"ClaimWrite", "Claim"}
	}
	return []string{"Claim"}
}

// TestStatementsPerCallLookupFirst counts what DoTx sends, transactions
// included, with LookupAlways: a retry of a finished request is the
// lookup alone, and a new key pays the lookup on top.
func TestStatementsPerCallLookupFirst(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		e, c := countStatements(t, tg)
		// The option changes no statement, so the counter names this
		// store's too.
		store, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithLookupFirst(idem.LookupAlways))
		if err != nil {
			t.Fatal(err)
		}
		// Where a session may read uncommitted rows, the lookup runs in
		// a read-only transaction of its own.
		lookup := []string{"Lookup"}
		if dialect.CapabilitiesOf(tg.Dialect).ReadsUncommitted {
			lookup = []string{"begin", "Lookup"}
		}
		for _, step := range []struct {
			name string
			hash []byte
			want idem.Outcome
			sent []string
		}{
			{"claimed", dbtest.HashA, idem.Claimed, slices.Concat(lookup, []string{"begin"}, claimStatements(tg.Dialect), []string{"effect", "Complete"})},
			{"replay", dbtest.HashA, idem.Replay, lookup},
			{"mismatch", dbtest.HashB, idem.Mismatch, lookup},
		} {
			c.take()
			res, err := store.DoTx(context.Background(), e.DB, nil, "k", step.hash, e.Effect("k", dbtest.Created))
			seen, _ := c.take()
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			if res.Outcome != step.want {
				t.Fatalf("%s: outcome %v, want %v", step.name, res.Outcome, step.want)
			}
			if !reflect.DeepEqual(seen, step.sent) {
				t.Errorf("%s: DoTx sent %v, want %v", step.name, seen, step.sent)
			}
		}
	})
}

// TestQueriesNamedByFields shows that Store.Queries keys each statement by
// the name of the field of dialect.Statements that holds it, on every
// built-in dialect: every key is a string field that the dialect fills,
// and every string field that it fills is a key.
func TestQueriesNamedByFields(t *testing.T) {
	for _, d := range []idem.Dialect{idem.Postgres(), idem.MySQL(), idem.MariaDB(), idem.TiDB(), idem.SQLite()} {
		store, err := idem.New(d)
		if err != nil {
			t.Fatal(err)
		}
		st := reflect.ValueOf(d.Statements(idem.DefaultTable, idem.DefaultLockTimeout))
		want := map[string]bool{}
		for i := range st.NumField() {
			if f := st.Field(i); f.Kind() == reflect.String && f.String() != "" {
				want[st.Type().Field(i).Name] = true
			}
		}
		got := map[string]bool{}
		for name := range store.Queries() {
			got[name] = true
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%T: Queries has %v, the dialect's Statements fill %v", d, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
}
