package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
	"github.com/idemgo/idem/proving/dbtest"
)

// movingSteps is the section of docs/operations.md that the tests of this
// file follow, and that Migrate's refusal names.
const movingSteps = "Moving a table to a shard column"

// recordColumns are the columns of a record that a move copies, after
// shard_key, with the key column written KEY.
var recordColumns = []string{"KEY", "request_hash", "created_at", "expires_at", "status", "header", "body", "checksum",
	"token", "phase", "lease_until", "resume_backoff", "incarnation"}

// copyRecords copies every record of the table from into the table to, as
// docs/operations.md, "Moving a table to a shard column", writes the
// statement: shard_key from the SQL shard, over the old record k and what
// join adds to the FROM clause, and every other column as it is.
func copyRecords(t *testing.T, db *sql.DB, tg target, to, from, shard, join string) {
	t.Helper()
	key := dbtest.KeyColumn(tg.Family)
	cols := strings.ReplaceAll(strings.Join(recordColumns, ", "), "KEY", key)
	vals := strings.ReplaceAll("k."+strings.Join(recordColumns, ", k."), "KEY", key)
	q := "INSERT INTO " + to + " (shard_key, " + cols + ")\nSELECT " + shard + ", " + vals + "\nFROM " + from + " AS k" + join
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tg.Dialect.Name() == "vitess" {
		// The statement writes on every shard, which a session of
		// transaction_mode SINGLE may not.
		execConn(t, conn, "SET transaction_mode = 'multi'")
		defer execConn(t, conn, "SET transaction_mode = 'single'")
	}
	if _, err := conn.ExecContext(ctx, q); err != nil {
		t.Fatalf("copy the records: %v\n%s", err, q)
	}
}

func execConn(t *testing.T, conn *sql.Conn, q string) {
	t.Helper()
	if _, err := conn.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// wantRefused checks that Migrate of store refuses its table, as the
// section says, with ErrInvalidArgument naming it.
func wantRefused(t *testing.T, db *sql.DB, store *idem.Store, what string) {
	t.Helper()
	err := store.Migrate(context.Background(), db)
	if !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), movingSteps) {
		t.Fatalf("Migrate of %s: %v, want ErrInvalidArgument naming %q", what, err, movingSteps)
	}
}

// movedTable makes the table that a move copies records into, with
// Migrate of a Store with opts, as idem migrate -table NEW -shard-column
// KIND does, and on Vitess shards it by shard_key, as docs/scaling.md
// says; it returns the table and its Store.
func movedTable(t *testing.T, db *sql.DB, tg target, opts ...idem.Option) (string, *idem.Store) {
	t.Helper()
	table := dbtest.NewTable(t, db, "idem_moved_")
	store := dbtest.NewStore(t, tg.Dialect, table, opts...)
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("Migrate of the new table: %v", err)
	}
	if tg.Dialect.Name() == "vitess" {
		dbtest.AddVindex(t, db, table, "shard_key")
	}
	return table, store
}

// wantReplay checks that the request of key under the shard value shard
// replays resp from the record of incarnation, without running.
func wantReplay(t *testing.T, db *sql.DB, store *idem.Store, shard any, key string, resp idem.Response, incarnation int64) {
	t.Helper()
	res, err := store.DoTx(idem.WithShard(context.Background(), shard), db, nil, key, dbtest.HashA, dbtest.MustNotRun(t))
	if err != nil || res.Outcome != idem.Replay {
		t.Fatalf("%s under %#v after the move: %v %v, want Replay of the moved record", key, shard, res.Outcome, err)
	}
	dbtest.SameResponse(t, res.Response, resp)
	if res.Incarnation != incarnation {
		t.Errorf("%s under %#v after the move: incarnation %d, want the moved record's, %d", key, shard, res.Incarnation, incarnation)
	}
}

// wantClaimed checks that the request of key under the shard value shard
// runs as a new one: no record of the table answers it.
func wantClaimed(t *testing.T, db *sql.DB, store *idem.Store, shard any, key, why string) {
	t.Helper()
	runs := 0
	res, err := store.DoTx(idem.WithShard(context.Background(), shard), db, nil, key, dbtest.HashA, countingFunc(&runs, dbtest.Created))
	if err != nil || res.Outcome != idem.Claimed || runs != 1 {
		t.Errorf("%s under %#v after the move: %v %v, %d runs; want Claimed, one run: %s", key, shard, res.Outcome, err, runs, why)
	}
}

// TestMovingToShardColumn follows docs/operations.md, "Moving a table to a
// shard column", on every database, with no binary of the earlier table
// serving meanwhile. Migrate of a Store with a shard column refuses a
// table made without the column, and one whose shard_key is of another
// type than the kind's, with ErrInvalidArgument naming the section, and
// leaves the table and its records as they were. The section's steps then
// make a table that Migrate accepts, on which the moved records replay
// their responses under their shard values, with their incarnations, and
// new requests are claimed by shard value and key: a record whose shard
// value the move had no way to tell stays behind, and its key's request
// runs again.
func TestMovingToShardColumn(t *testing.T) {
	move := func(t *testing.T, tg target) {
		t.Run("WithoutShardColumn", func(t *testing.T) { moveUnsharded(t, tg) })
		t.Run("AnotherType", func(t *testing.T) { moveAnotherType(t, tg) })
	}
	dbtest.ForEachPooled(t, move)
	dbtest.ForEachVitess(t, move)
}

// moveUnsharded moves a table made without a shard column: its records go
// to a new table, each with the shard value that the service's own table
// of orders gives its key, as the section's INSERT ... SELECT ... JOIN
// does.
func moveUnsharded(t *testing.T, tg target) {
	ctx := context.Background()
	db := tg.Open(t)
	ph := tg.Dialect.Placeholder
	old := dbtest.NewTable(t, db, "idem_unsharded_")
	oldStore := dbtest.NewStore(t, tg.Dialect, old)
	if err := oldStore.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	keyType := map[string]string{"postgres": "bytea", "mysql": "VARBINARY(512)", "sqlite": "BLOB"}[tg.Family]
	orders := dbtest.NewTable(t, db, "orders_")
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+orders+" (customer_id BIGINT NOT NULL, idempotency_key "+keyType+" NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if tg.Dialect.Name() == "vitess" {
		// The table without a shard column is sharded by its key, and
		// the service's orders by the key too, so that a request
		// writes on one shard.
		dbtest.AddVindex(t, db, old, "`key`")
		dbtest.AddVindex(t, db, orders, "idempotency_key")
	}

	// The service, before the move: each request places an order of
	// its customer, which records the key; the request of "no-order"
	// places none, and its record has no customer that a move can tell.
	place := func(customer int64, key string, resp idem.Response) idem.Func {
		return func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			_, err := tx.ExecContext(ctx, "INSERT INTO "+orders+" (customer_id, idempotency_key) VALUES ("+ph(1)+", "+ph(2)+")", customer, []byte(key))
			return resp, err
		}
	}
	first := idem.Response{Status: 201, Body: []byte(`{"customer":7}`)}
	second := idem.Response{Status: 201, Body: []byte(`{"customer":8}`)}
	incarnations := map[string]int64{}
	for _, r := range []struct {
		key string
		fn  idem.Func
	}{
		{"order-1", place(7, "order-1", first)},
		{"order-2", place(8, "order-2", second)},
		{"no-order", func(context.Context, *sql.Tx) (idem.Response, error) { return dbtest.Created, nil }},
	} {
		res, err := oldStore.DoTx(ctx, db, nil, r.key, dbtest.HashA, r.fn)
		dbtest.WantOutcome(t, res, err, idem.Claimed)
		incarnations[r.key] = res.Incarnation
	}

	// Migrate of a Store with a shard column refuses the table, and
	// leaves it as it was.
	shape := func() string {
		t.Helper()
		var lines []string
		qs := describeQueries[tg.Family]
		for _, q := range qs[:2] { // columns and indexes
			l, err := queryLines(db, q, old)
			if err != nil {
				t.Fatalf("describe %s: %v", old, err)
			}
			lines = append(lines, l...)
		}
		return strings.Join(lines, "\n")
	}
	before := shape()
	wantRefused(t, db, dbtest.NewStore(t, tg.Dialect, old, idem.WithShardColumn(dbtest.ShardKind)), "a table without shard_key")
	if after := shape(); after != before {
		t.Errorf("the refused Migrate changed the table:\n%s\nit was\n%s", after, before)
	}
	res, err := oldStore.DoTx(ctx, db, nil, "order-1", dbtest.HashA, dbtest.MustNotRun(t))
	dbtest.WantOutcome(t, res, err, idem.Replay)

	// The steps: a new table, the records copied with the customer of
	// each key's order, and the service on the new table.
	moved, store := movedTable(t, db, tg, idem.WithShardColumn(dbtest.ShardKind))
	copyRecords(t, db, tg, moved, old, "o.customer_id", "\nJOIN "+orders+" AS o ON o.idempotency_key = k."+dbtest.KeyColumn(tg.Family))
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate of the new table after the copy: %v", err)
	}
	wantReplay(t, db, store, int64(7), "order-1", first, incarnations["order-1"])
	wantReplay(t, db, store, int64(8), "order-2", second, incarnations["order-2"])
	wantClaimed(t, db, store, int64(8), "order-1", "customer 8 never sent it")
	wantClaimed(t, db, store, int64(7), "no-order", "its record had no order to tell its customer, and was not moved")
}

// moveAnotherType moves a table with a shard column of a type other than
// the kind's, as an earlier version, whose WithShardColumn took an SQL
// type, made it: on PostgreSQL varchar(16) for text(64), converted in
// place to text; on the MySQL family VARCHAR(16) for text(64), converted
// in place to VARBINARY(64) through utf8mb4, but on TiDB, which refuses
// that, moved to a new table; on SQLite TEXT for int64, moved to a new
// table with each value cast to an INTEGER, after a VARCHAR(16) column
// is shown to serve text(64) as it is, having its affinity.
func moveAnotherType(t *testing.T, tg target) {
	ctx := context.Background()
	db := tg.Open(t)
	kind, earlier, values := idem.ShardText(64), "varchar(16)", []any{"ténant-a", "tenant-b"}
	inPlace := ""
	switch {
	case tg.Family == "sqlite":
		sqliteAffinityServes(t, db, tg)
		kind, earlier, values = idem.ShardInt64(), "TEXT", []any{int64(7), int64(8)}
	case tg.Family == "postgres":
		inPlace = "ALTER TABLE {T} ALTER COLUMN shard_key TYPE text"
	case tg.Dialect.Name() != "tidb":
		earlier, inPlace = "VARCHAR(16)", "ALTER TABLE {T} MODIFY shard_key VARBINARY(64) NOT NULL"
	default:
		earlier = "VARCHAR(16)"
	}
	old := earlierShardTable(t, db, tg, kind, earlier)
	responses := make([]idem.Response, len(values))
	for i, v := range values {
		responses[i] = idem.Response{Status: 201, Body: []byte(fmt.Sprintf(`{"shard":"%v"}`, v))}
		insertShardRecord(t, db, tg, old, v, "order-1", responses[i], int64(100+i))
	}
	wantRefused(t, db, dbtest.NewStore(t, tg.Dialect, old, idem.WithShardColumn(kind)), "a table whose shard_key is "+earlier)

	table, store := old, dbtest.NewStore(t, tg.Dialect, old, idem.WithShardColumn(kind))
	switch {
	case inPlace != "" && tg.Family == "postgres":
		// varchar to text rewrites neither the table nor its index.
		files := func() string {
			var s string
			if err := db.QueryRowContext(ctx, "SELECT pg_relation_filenode('"+old+"') || ' ' || pg_relation_filenode('"+old+"_pkey')").Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		was := files()
		execAll(t, db, "convert in place", []string{strings.ReplaceAll(inPlace, "{T}", old)})
		if now := files(); now != was {
			t.Errorf("ALTER COLUMN TYPE text rewrote the table or its primary key: files %s, were %s", now, was)
		}
	case inPlace != "":
		// The characters in UTF-8 first, where the column's character
		// set is another: VARBINARY keeps the bytes of the column's.
		var charset string
		if err := db.QueryRowContext(ctx, "SELECT CHARACTER_SET_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '"+old+"' AND COLUMN_NAME = 'shard_key'").Scan(&charset); err != nil {
			t.Fatal(err)
		}
		if charset != "utf8mb4" {
			execAll(t, db, "convert to utf8mb4", []string{"ALTER TABLE " + old + " MODIFY shard_key VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"})
		}
		execAll(t, db, "convert in place", []string{strings.ReplaceAll(inPlace, "{T}", old)})
	case tg.Family == "mysql":
		// TiDB refuses to change the type of a column of the primary
		// key: the records move to a new table.
		if _, err := db.ExecContext(ctx, "ALTER TABLE "+old+" MODIFY shard_key VARBINARY(64) NOT NULL"); err == nil {
			t.Fatalf("TiDB converted the shard column in place, which docs/operations.md says it refuses")
		}
		table, store = movedTable(t, db, tg, idem.WithShardColumn(kind))
		copyRecords(t, db, tg, table, old, "CONVERT(k.shard_key USING utf8mb4)", "")
	default:
		table, store = movedTable(t, db, tg, idem.WithShardColumn(kind))
		copyRecords(t, db, tg, table, old, "CAST(k.shard_key AS INTEGER)", "")
	}
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate after the steps: %v", err)
	}
	for i, v := range values {
		wantReplay(t, db, store, v, "order-1", responses[i], int64(100+i))
	}
	if tg.Family == "sqlite" {
		wantClaimed(t, db, store, int64(9), "order-1", "customer 9 never sent it")
	} else {
		wantClaimed(t, db, store, "Ténant-a", "order-1", "a shard value is compared byte for byte, and only ténant-a sent it")
	}
	if table != old {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != len(values)+1 {
			t.Errorf("the new table holds %d records, %v; want the %d moved and the new one", n, err, len(values))
		}
	}
}

// sqliteAffinityServes shows that on SQLite a shard column of the kind's
// affinity serves as it is, whatever its type's name: Migrate accepts an
// earlier version's VARCHAR(16) for text(64), and its records replay.
func sqliteAffinityServes(t *testing.T, db *sql.DB, tg target) {
	t.Helper()
	table := earlierShardTable(t, db, tg, idem.ShardText(64), "VARCHAR(16)")
	insertShardRecord(t, db, tg, table, "ténant-a", "order-1", dbtest.Created, 42)
	store := dbtest.NewStore(t, tg.Dialect, table, idem.WithShardColumn(idem.ShardText(64)))
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatalf("Migrate of a table whose shard_key is VARCHAR(16), for text(64): %v, want it accepted, of TEXT affinity", err)
	}
	wantReplay(t, db, store, "ténant-a", "order-1", dbtest.Created, 42)
}

// earlierShardTable makes the table with a shard column of kind, as this
// version's Migrate makes it, but with shard_key of the type earlier, as
// an earlier version made it, without the MySQL dialect's procedures; on
// Vitess it shards it by shard_key.
func earlierShardTable(t *testing.T, db *sql.DB, tg target, kind idem.ShardKind, earlier string) string {
	t.Helper()
	table := dbtest.NewTable(t, db, "idem_earlier_")
	var made bool
	for _, q := range dbtest.NewStore(t, tg.Dialect, table, idem.WithShardColumn(kind)).Schema() {
		if strings.HasPrefix(q, "CREATE PROCEDURE") {
			continue
		}
		if strings.HasPrefix(q, "CREATE TABLE") {
			line, _, _ := strings.Cut(q[strings.Index(q, "shard_key"):], "\n")
			q = strings.Replace(q, line, "shard_key    "+earlier+" NOT NULL,", 1)
			made = true
		}
		execAll(t, db, "the earlier table", []string{q})
	}
	if !made {
		t.Fatal("the schema has no CREATE TABLE")
	}
	if tg.Dialect.Name() == "vitess" {
		dbtest.AddVindex(t, db, table, "shard_key")
	}
	return table
}

// insertShardRecord writes the finished record of key under the shard
// value shard, answering resp, with incarnation, as an earlier version's
// binary left it.
func insertShardRecord(t *testing.T, db *sql.DB, tg target, table string, shard any, key string, resp idem.Response, incarnation int64) {
	t.Helper()
	header, body := codec.EncodeHeader(resp.Header), resp.Body
	if body == nil {
		body = []byte{}
	}
	sum := codec.Checksum([]byte(key), dbtest.HashA, int64(resp.Status), header, body)
	cols := []string{"shard_key", dbtest.KeyColumn(tg.Family), "request_hash", "created_at", "expires_at", "status", "header", "body", "checksum", "token", "incarnation"}
	args := []any{shard, []byte(key), dbtest.HashA, int64(1), int64(1) << 62, int64(resp.Status), header, body, sum[:], int64(1), incarnation}
	marks := make([]string, len(cols))
	for i := range marks {
		marks[i] = tg.Dialect.Placeholder(i + 1)
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "), strings.Join(marks, ", "))
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("insert the record of %s under %#v: %v", key, shard, err)
	}
}
