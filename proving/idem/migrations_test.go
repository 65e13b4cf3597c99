package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestMigrationFiles checks the files that goose and golang-migrate users
// run instead of Store.Migrate, by running them, each time on a table of its
// own: applied in order, they must make the very table that Migrate makes
// (columns and indexes, as the database reports them), and undone in
// reverse order, each Down must bring the table back to what it was before
// its Up, down to no table at all. Both tools must have the same versions,
// so that users of either get the same table. The files of a table with a
// shard column, in each dialect's sharded/, must make the table that
// Migrate makes with WithShardColumn(dbtest.ShardKind), the kind they are
// for: on SQLite, whose columns store and compare by affinity, a shard_key
// of the same affinity (Migrate checks no more); on MySQL, Migrate's claim
// procedures and, beside them, the procedures of the versions before shard
// kinds, which those versions' binaries call during a rolling upgrade, and
// which Migrate does not make for a new table.
func TestMigrationFiles(t *testing.T) {
	t.Run("versions", func(t *testing.T) {
		dirs, err := os.ReadDir(filepath.Join("..", "..", "migrations"))
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range dirs {
			for _, layout := range []string{dir.Name(), dir.Name() + "/sharded"} {
				goose := migrationNames(loadMigrations(t, layout, "goose", idem.DefaultTable))
				migrate := migrationNames(loadMigrations(t, layout, "migrate", idem.DefaultTable))
				if len(goose) == 0 || !slices.Equal(goose, migrate) {
					t.Errorf("%s: goose has versions %q, golang-migrate %q", layout, goose, migrate)
				}
			}
		}
	})
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		db := tg.Open(t)
		for _, layout := range []struct {
			dir     string
			earlier []string // the procedures of earlier versions that the files make and Migrate does not
			opts    []idem.Option
		}{
			{tg.Family, nil, nil},
			{tg.Family + "/sharded", []string{"T_claim", "T_claim2"}, []idem.Option{idem.WithShardColumn(dbtest.ShardKind)}},
		} {
			t.Run(layout.dir, func(t *testing.T) { checkMigrationFiles(t, db, tg, layout.dir, layout.earlier, layout.opts...) })
		}
	})
}

// checkMigrationFiles checks the files of dir, with each tool, against the
// table that Store.Migrate makes with opts. The files may make, beside
// Migrate's procedures, those named earlier (with the table written T),
// and must where Migrate makes procedures at all.
func checkMigrationFiles(t *testing.T, db *sql.DB, tg target, dir string, earlier []string, opts ...idem.Option) {
	t.Helper()
	want := comparable(tg.Family, describe(t, db, tg.Family, migratedTable(t, db, tg.Dialect, opts...)))
	if len(want.Columns) == 0 || len(want.Indexes) == 0 {
		t.Fatalf("Store.Migrate made a table with no columns or no index: %+v", want)
	}
	for _, tool := range []string{"goose", "migrate"} {
		t.Run(tool, func(t *testing.T) {
			table := dbtest.NewTable(t, db, "idem_files_")
			steps := loadMigrations(t, dir, tool, table)
			shapes := []tableShape{describe(t, db, tg.Family, table)} // shapes[i]: after i Ups
			for _, m := range steps {
				execAll(t, db, m.name+" up", m.up)
				shapes = append(shapes, describe(t, db, tg.Family, table))
			}
			got := comparable(tg.Family, shapes[len(steps)])
			if want.Routines == nil {
				// The files are the whole family's, and make the
				// procedure of the MySQL dialect, which the
				// target's dialect does without.
				got.Routines = nil
			}
			for _, name := range earlier {
				i := slices.IndexFunc(got.Routines, func(r string) bool { return strings.HasPrefix(r, name+" ") })
				if i < 0 && want.Routines != nil {
					t.Errorf("the %s files make no procedure %s, which binaries of earlier versions call", tool, name)
				}
				if i >= 0 {
					got.Routines = slices.Delete(got.Routines, i, i+1)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the %s files make\n%v\nStore.Migrate makes\n%v", tool, got, want)
			}
			for i := len(steps) - 1; i >= 0; i-- {
				execAll(t, db, steps[i].name+" down", steps[i].down)
				if got := describe(t, db, tg.Family, table); !reflect.DeepEqual(got, shapes[i]) {
					t.Errorf("after %s down the table is\n%v\nbefore its up it was\n%v", steps[i].name, got, shapes[i])
				}
			}
		})
	}
}

// TestMigrateUpgradesOldTable checks that Store.Migrate brings a table made
// by the first version of the package up to date, into the very table it
// makes anew, and that running it again changes nothing. The records the
// old version left must survive the deploy: a finished request still
// replays byte for byte, one in flight still answers InFlight, and an
// expired key is claimed anew and completed under its new claim's token,
// although the old records carry none (0). The old records read
// incarnation 0, and the records claimed after the upgrade, the expired
// key's among them, an incarnation of their own.
func TestMigrateUpgradesOldTable(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		db := tg.Open(t)
		table := dbtest.NewTable(t, db, "idem_old_")
		execAll(t, db, "00001 up", loadMigrations(t, tg.Family, "goose", table)[0].up)

		// MariaDB's first table had the token column already, and its
		// first version wrote a claim's token there; the others had none.
		var oldToken int64
		if describe(t, db, tg.Family, table).hasColumn("token") {
			oldToken = 4711
		}
		now := time.Now()
		hash := idem.Fingerprint([]byte("POST /orders"), []byte(`{"item":88}`))
		first := idem.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/1"}}, Body: []byte(`{"order":1}`)}
		insertOld(t, db, tg, table, "finished", hash, now.Add(-time.Hour), now.Add(23*time.Hour), &first, oldToken)
		insertOld(t, db, tg, table, "unfinished", hash, now.Add(-time.Minute), now.Add(time.Hour), nil, oldToken)
		insertOld(t, db, tg, table, "expired", hash, now.Add(-25*time.Hour), now.Add(-time.Hour), &first, oldToken)

		store := dbtest.NewStore(t, tg.Dialect, table, idem.WithLockTimeout(0))
		want := describe(t, db, tg.Family, migratedTable(t, db, tg.Dialect))
		for run := 1; run <= 2; run++ {
			if err := store.Migrate(ctx, db); err != nil {
				t.Fatalf("Migrate, run %d: %v", run, err)
			}
			if got := describe(t, db, tg.Family, table); !reflect.DeepEqual(got, want) {
				t.Fatalf("after Migrate run %d the old table is\n%v\na new one is\n%v", run, got, want)
			}
		}

		check := func(what string, res idem.Result, err error, outcome idem.Outcome, resp idem.Response) {
			t.Helper()
			if err != nil || res.Outcome != outcome || !reflect.DeepEqual(res.Response, resp) {
				t.Fatalf("%s: %v %+v, want %v %+v", what, err, res, outcome, resp)
			}
		}
		e := &dbtest.Env{Dialect: tg.Dialect, DB: db, Store: store, Table: table}
		second := idem.Response{Status: 202, Body: []byte(`{"order":2}`)}
		third := idem.Response{Status: 200, Header: http.Header{"X-Order": {"3"}}, Body: []byte{}}
		respond := func(resp idem.Response) idem.Func {
			return func(context.Context, *sql.Tx) (idem.Response, error) { return resp, nil }
		}

		incarnation := func(what string, res idem.Result, want int64) {
			t.Helper()
			if want == 0 && res.Incarnation != 0 {
				t.Errorf("%s: incarnation %d, want 0: the record is older than the column", what, res.Incarnation)
			}
			if want != 0 && res.Incarnation != want {
				t.Errorf("%s: incarnation %d, want %d, the claim's", what, res.Incarnation, want)
			}
		}
		res, err := e.Do(t, "finished", hash, dbtest.MustNotRun(t), false)
		check("Do on the old finished record", res, err, idem.Replay, first)
		incarnation("Do on the old finished record", res, 0)
		res, err = store.Lookup(ctx, db, "finished")
		check("Lookup of the old finished record", res, err, idem.Replay, first)
		incarnation("Lookup of the old finished record", res, 0)
		res, err = store.DoTx(ctx, db, nil, "unfinished", hash, dbtest.MustNotRun(t))
		check("DoTx on the old unfinished record", res, err, idem.InFlight, idem.Response{})
		res, err = store.Lookup(ctx, db, "unfinished")
		check("Lookup of the old unfinished record", res, err, idem.InFlight, idem.Response{})
		incarnation("Lookup of the old unfinished record", res, 0)
		if _, err := store.Lookup(ctx, db, "expired"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("Lookup of the old expired record: %v, want ErrNotFound", err)
		}
		res, err = e.Do(t, "expired", hash, respond(second), true)
		check("Do on the old expired record", res, err, idem.Claimed, second)
		if res.Incarnation == 0 {
			t.Errorf("Do that took the old expired record over: incarnation 0, want its own")
		}
		takenOver := res.Incarnation
		res, err = store.DoTx(ctx, db, nil, "expired", hash, dbtest.MustNotRun(t))
		check("DoTx on the taken-over record", res, err, idem.Replay, second)
		incarnation("DoTx on the taken-over record", res, takenOver)
		res, err = store.DoTx(ctx, db, nil, "new", hash, respond(third))
		check("DoTx on a new key", res, err, idem.Claimed, third)
		if res.Incarnation == 0 || res.Incarnation == takenOver {
			t.Errorf("DoTx on a new key: incarnation %d, want its own", res.Incarnation)
		}
		newKey := res.Incarnation
		res, err = e.Do(t, "new", hash, dbtest.MustNotRun(t), false)
		check("Do on the new record", res, err, idem.Replay, third)
		incarnation("Do on the new record", res, newKey)
		for key, want := range map[string]int64{"finished": 0, "unfinished": 0, "expired": takenOver, "new": newKey} {
			if got := readColumn(t, db, tg, table, key, "incarnation"); got != want {
				t.Errorf("incarnation of the %s record in the table = %d, want %d", key, got, want)
			}
		}

		for _, key := range []string{"finished", "unfinished"} {
			if got := readColumn(t, db, tg, table, key, "token"); got != oldToken {
				t.Errorf("token of the old %s record = %d, want %d", key, got, oldToken)
			}
		}
		for _, key := range []string{"expired", "new"} {
			if got := readColumn(t, db, tg, table, key, "token"); got == 0 || got == oldToken {
				t.Errorf("token of the %s record = %d, want its claim's own", key, got)
			}
		}
	})
}

// migration is one version of a dialect's migrations, as one tool reads it,
// with the table renamed.
type migration struct {
	version  int
	name     string // "2_add_claim_token": the version without its padding, and its name
	up, down []string
}

// migrationFileName splits a migration file's name into version, name and
// the rest (".sql", ".up.sql", ".down.sql").
var migrationFileName = regexp.MustCompile(`^0*([0-9]+)_([a-z0-9_]+)(\..*)$`)

// loadMigrations reads the files of one tool ("goose" or "migrate") in a
// dialect's directory, in version order, with idempotency_keys renamed to
// table.
func loadMigrations(t *testing.T, dialect, tool, table string) []migration {
	t.Helper()
	dir := filepath.Join("..", "..", "migrations", dialect, tool)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*migration{}
	var ms []*migration
	for _, entry := range entries {
		m := migrationFileName.FindStringSubmatch(entry.Name())
		if m == nil {
			t.Fatalf("%s: %s is not a migration file", dir, entry.Name())
		}
		file := filepath.Join(dir, entry.Name())
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), idem.DefaultTable, table)
		name := m[1] + "_" + m[2]
		if byName[name] == nil {
			version, _ := strconv.Atoi(m[1])
			byName[name] = &migration{version: version, name: name}
			ms = append(ms, byName[name])
		}
		mig := byName[name]
		switch {
		case tool == "goose" && m[3] == ".sql":
			up, down, ok := gooseSections(text)
			if !ok {
				t.Fatalf("%s: no -- +goose Up and -- +goose Down sections, in that order", file)
			}
			mig.up, mig.down = statements(t, file, up), statements(t, file, down)
		case tool == "migrate" && m[3] == ".up.sql":
			mig.up = statements(t, file, text)
		case tool == "migrate" && m[3] == ".down.sql":
			mig.down = statements(t, file, text)
		default:
			t.Fatalf("%s is not a %s file", file, tool)
		}
	}
	for _, mig := range ms {
		if len(mig.up) == 0 || len(mig.down) == 0 {
			t.Fatalf("%s: version %s lacks its up or its down", dir, mig.name)
		}
	}
	slices.SortFunc(ms, func(a, b *migration) int { return a.version - b.version })
	out := make([]migration, len(ms))
	for i, mig := range ms {
		out[i] = *mig
	}
	return out
}

func migrationNames(ms []migration) []string {
	var vs []string
	for _, m := range ms {
		vs = append(vs, m.name)
	}
	return vs
}

// gooseSections returns the text between -- +goose Up and -- +goose Down,
// and the text after -- +goose Down.
func gooseSections(text string) (up, down string, ok bool) {
	_, rest, ok1 := strings.Cut(text, "-- +goose Up\n")
	up, down, ok2 := strings.Cut(rest, "-- +goose Down\n")
	return up, down, ok1 && ok2
}

// statements splits SQL into statements at the semicolons that end a line,
// as goose does, leaving out comment lines. Between -- +goose
// StatementBegin and StatementEnd, and in a CREATE PROCEDURE up to its
// unindented line END; (golang-migrate sends a file whole), the semicolons
// that end lines
// are the body's, and the statement is all of it. A statement left without
// its semicolon fails the test, as it fails goose.
func statements(t *testing.T, file, text string) []string {
	t.Helper()
	var (
		out              []string
		cur              strings.Builder
		goose, procedure bool
	)
	flush := func() {
		if stmt := strings.TrimSpace(cur.String()); stmt != "" {
			out = append(out, stmt)
		}
		cur.Reset()
	}
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "-- +goose StatementBegin":
			goose = true
		case trimmed == "-- +goose StatementEnd":
			goose = false
			flush()
		case strings.HasPrefix(trimmed, "-- +goose"):
			t.Fatalf("%s: %s is not supported here", file, trimmed)
		case strings.HasPrefix(trimmed, "--"):
		default:
			if strings.TrimSpace(cur.String()) == "" && !goose && strings.HasPrefix(trimmed, "CREATE PROCEDURE") {
				procedure = true
			}
			cur.WriteString(line)
			switch {
			case goose:
			case procedure:
				if strings.TrimRight(line, "\r\n") == "END;" { // unindented: the body's own END
					procedure = false
					flush()
				}
			case strings.HasSuffix(trimmed, ";"):
				flush()
			}
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		t.Fatalf("%s: statement without a semicolon at the end of its line: %s", file, rest)
	}
	return out
}

func execAll(t *testing.T, db *sql.DB, what string, stmts []string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, q)
		}
	}
}

// comparable is s as TestMigrationFiles compares it with Migrate's table:
// on SQLite, shard_key's declared type is written as its affinity, since
// SQLite stores and compares a column's values by affinity, whatever the
// type's name, and Migrate checks the affinity (dialect.SQLite's
// ShardColumnCheck); all else as the database reports it.
func comparable(family string, s tableShape) tableShape {
	if family != "sqlite" {
		return s
	}
	cols := slices.Clone(s.Columns)
	for i, c := range cols {
		if rest, ok := strings.CutPrefix(c, "shard_key "); ok {
			typ, more, _ := strings.Cut(rest, " ")
			cols[i] = "shard_key affinity:" + sqliteAffinity(typ) + " " + more
		}
	}
	s.Columns = cols
	return s
}

// sqliteAffinity is the affinity that SQLite gives a column of the
// declared type typ, by its rules in their order.
func sqliteAffinity(typ string) string {
	typ = strings.ToUpper(typ)
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(typ, sub) })
	}
	switch {
	case has("INT"):
		return "INTEGER"
	case has("CHAR", "CLOB", "TEXT"):
		return "TEXT"
	case has("BLOB") || typ == "":
		return "BLOB"
	case has("REAL", "FLOA", "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}

// migratedTable makes a table with Store.Migrate, the reference for the
// others, and returns its name.
func migratedTable(t *testing.T, db *sql.DB, d idem.Dialect, opts ...idem.Option) string {
	t.Helper()
	table := dbtest.NewTable(t, db, "idem_ref_")
	if err := dbtest.NewStore(t, d, table, opts...).Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return table
}

// tableShape is what a database reports about a table, one line per column
// (name, type, nullability, default, as the database puts them) and one per
// index, sorted by name, and one per procedure of the table's (MySQL's
// claim: its parameters, security, data access and body), with the
// table's name written T so that two tables compare. A table that does not
// exist has no lines.
type tableShape struct{ Columns, Indexes, Routines []string }

func (s tableShape) String() string {
	return "  " + strings.Join(slices.Concat(s.Columns, s.Indexes, s.Routines), "\n  ")
}

func (s tableShape) hasColumn(name string) bool {
	return slices.ContainsFunc(s.Columns, func(c string) bool { return strings.HasPrefix(c, name+" ") })
}

// describeQueries are the catalog queries behind tableShape, by family:
// columns, indexes, and where the family has them, the table's procedures,
// each taking the table's name.
var describeQueries = map[string][3]string{
	"postgres": {
		`SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY column_name`,
		`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 ORDER BY indexname`,
	},
	"mysql": {
		`SELECT column_name, column_type, is_nullable, column_default FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = ? ORDER BY column_name`,
		`SELECT index_name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = ? GROUP BY index_name, non_unique ORDER BY index_name`,
		`SELECT r.routine_name,
			(SELECT GROUP_CONCAT(CONCAT(a.parameter_mode, ' ', a.parameter_name, ' ', a.dtd_identifier) ORDER BY a.ordinal_position SEPARATOR ', ')
			FROM information_schema.parameters AS a WHERE a.specific_schema = r.routine_schema AND a.specific_name = r.routine_name),
			r.security_type, r.sql_data_access, r.routine_definition
		FROM information_schema.routines AS r, (SELECT ? AS t) AS p
		WHERE r.routine_schema = DATABASE() AND r.routine_type = 'PROCEDURE'
		AND r.routine_name IN (CONCAT(p.t, '_claim'), CONCAT(p.t, '_claim2'), CONCAT(p.t, '_claim_int64'), CONCAT(p.t, '_claim_bytes'))
		ORDER BY r.routine_name`,
	},
	"sqlite": {
		`SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?) ORDER BY name`,
		`SELECT l.name, l."unique", l.origin, group_concat(i.name) FROM pragma_index_list(?) AS l, pragma_index_info(l.name) AS i
		GROUP BY l.name ORDER BY l.name`,
	},
}

func describe(t *testing.T, db *sql.DB, family, table string) tableShape {
	t.Helper()
	qs, ok := describeQueries[family]
	if !ok {
		t.Fatalf("no catalog queries for %s", family)
	}
	var s tableShape
	for i, dst := range []*[]string{&s.Columns, &s.Indexes, &s.Routines} {
		if qs[i] == "" {
			continue
		}
		lines, err := queryLines(db, qs[i], table)
		if err != nil {
			t.Fatalf("describe %s: %v", table, err)
		}
		for _, line := range lines {
			*dst = append(*dst, strings.ReplaceAll(line, table, "T"))
		}
	}
	return s
}

// queryLines returns the rows of a query, each as its values joined by
// spaces, NULL for NULL.
func queryLines(db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(context.Background(), q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var lines []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		fields := make([]string, len(vals))
		for i, v := range vals {
			fields[i] = "NULL"
			if v.Valid {
				fields[i] = v.String
			}
		}
		lines = append(lines, strings.Join(fields, " "))
	}
	return lines, rows.Err()
}

// insertOld writes a record as the first version of the package left it:
// the response, if any, encoded and checksummed as Do stores it, and the
// token only where the first table had the column (oldToken not 0).
func insertOld(t *testing.T, db *sql.DB, tg target, table, key string, hash []byte, created, expires time.Time, resp *idem.Response, oldToken int64) {
	t.Helper()
	cols := []string{dbtest.KeyColumn(tg.Family), "request_hash", "created_at", "expires_at", "status", "header", "body", "checksum"}
	args := []any{[]byte(key), hash, created.UnixMicro(), expires.UnixMicro(), nil, nil, nil, nil}
	if resp != nil {
		header, body := codec.EncodeHeader(resp.Header), resp.Body
		if body == nil {
			body = []byte{}
		}
		sum := codec.Checksum([]byte(key), hash, int64(resp.Status), header, body)
		args[4], args[5], args[6], args[7] = int64(resp.Status), header, body, sum[:]
	}
	if oldToken != 0 {
		cols, args = append(cols, "token"), append(args, oldToken)
	}
	marks := make([]string, len(cols))
	for i := range marks {
		marks[i] = tg.Dialect.Placeholder(i + 1)
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "), strings.Join(marks, ", "))
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("insert %s: %v", key, err)
	}
}

// readColumn reads the number in column of key's record.
func readColumn(t *testing.T, db *sql.DB, tg target, table, key, column string) int64 {
	t.Helper()
	var n int64
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", column, table, dbtest.KeyColumn(tg.Family), tg.Dialect.Placeholder(1))
	if err := db.QueryRowContext(context.Background(), q, []byte(key)).Scan(&n); err != nil {
		t.Fatalf("%s of %q: %v", column, key, err)
	}
	return n
}
