// Package placement puts the tables that tests make where docs/scaling.md
// tells an operator to put idem's: on Vitess's sharded keyspace, a table
// needs a vindex before vtgate lets a statement at it; on a Citus
// coordinator, a table is distributed over the workers, co-located with
// the table whose rows share its transactions. Elsewhere tables stay as
// they are made. The server harness (proving/dbtest) and the published
// properties of idemtest both place their tables with it, so that the two
// agree with each other and with the docs.
package placement

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idemgo/idem/dialect"
)

// Sharded says whether d runs on Vitess's sharded keyspace, where every
// table needs a vindex (AddVindex).
func Sharded(d dialect.Dialect) bool { return d.Name() == "vitess" }

// vschemaLock serializes the ALTER VSCHEMA statements sent to one vtgate:
// vtgate saves the keyspace's VSchema with a check of its version, but then
// writes the VSchema that it serves as it has it, so that of two changes at
// once the second may be lost there. Test binaries run at once, so the lock
// is vtgate's (GET_LOCK, which it holds on one shard for the session that
// took it).
const vschemaLock = "idem_test_vschema"

// AddVindex shards table on Vitess's keyspace by column with the keyspace's
// xxhash vindex, and takes the table out of the VSchema at the end of t,
// before a cleanup registered earlier drops it.
func AddVindex(t testing.TB, db *sql.DB, table, column string) {
	t.Helper()
	alterVSchema(t, db, "ALTER VSCHEMA ON "+table+" ADD VINDEX xxhash("+column+") USING xxhash")
	t.Cleanup(func() { alterVSchema(t, db, "ALTER VSCHEMA DROP TABLE "+table) })
}

// alterVSchema runs one ALTER VSCHEMA statement under vschemaLock.
func alterVSchema(t testing.TB, db *sql.DB, stmt string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('"+vschemaLock+"', 60)").Scan(&got); err != nil || got.Int64 != 1 {
		t.Fatalf("GET_LOCK(%s) = %v, %v", vschemaLock, got, err)
	}
	defer func() {
		if _, err := conn.ExecContext(ctx, "SELECT RELEASE_LOCK('"+vschemaLock+"')"); err != nil {
			t.Errorf("RELEASE_LOCK(%s): %v", vschemaLock, err)
		}
	}()
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// CitusCoordinator reports whether db, reached through d, is the
// coordinator of a Citus cluster that can distribute a table: a PostgreSQL
// database with the citus extension and an active node that takes shards.
// A PostgreSQL with the extension and no such node keeps its tables as
// they are, as every other database does.
func CitusCoordinator(t testing.TB, d dialect.Dialect, db *sql.DB) bool {
	t.Helper()
	if d.Name() != "postgres" {
		return false
	}
	ctx := context.Background()
	var citus bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil {
		t.Fatalf("look for the citus extension: %v", err)
	}
	if !citus {
		return false
	}
	var nodes bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_dist_node WHERE isactive AND shouldhaveshards)").Scan(&nodes); err != nil {
		t.Fatalf("look for Citus's nodes: %v", err)
	}
	return nodes
}

// Distribute spreads table over the Citus workers by column, in the
// co-location group of colocateWith's where that is not empty.
func Distribute(t testing.TB, db *sql.DB, table, column, colocateWith string) {
	t.Helper()
	var err error
	if colocateWith == "" {
		_, err = db.ExecContext(context.Background(), `SELECT create_distributed_table($1, $2)`, table, column)
	} else {
		_, err = db.ExecContext(context.Background(), `SELECT create_distributed_table($1, $2, colocate_with => $3)`, table, column, colocateWith)
	}
	if err != nil {
		t.Fatalf("distribute %s: %v", table, err)
	}
}
