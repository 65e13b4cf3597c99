package idemtest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/idemgo/idem"
)

// Where a property's tables live on a database that spreads a table over
// shards, as docs/scaling.md tells an operator to place them: a request's
// record and its effects on one shard, so that its transaction stays there.
// Through idem.Vitess(), the keyspace is sharded and every table needs a
// vindex before vtgate lets a statement at it; on a Citus coordinator, the
// tables are distributed over the workers, co-located. Elsewhere the
// tables stay as they are made.

// sharded says whether d runs on Vitess's sharded keyspace.
func sharded(d idem.Dialect) bool { return d.Name() == "vitess" }

// vschemaLock serializes the ALTER VSCHEMA statements sent to one vtgate:
// vtgate saves the keyspace's VSchema with a check of its version, but then
// writes the VSchema that it serves as it has it, so that of two changes at
// once the second may be lost there. Test binaries run at once, so the lock
// is vtgate's (GET_LOCK, which it holds on one shard for the session that
// took it), under the name that the other tests of this module take too.
const vschemaLock = "idem_test_vschema"

// addVindex shards table on Vitess's keyspace by column with the keyspace's
// xxhash vindex, and takes the table out of the VSchema at the end of t,
// before the cleanup that drops it, which was registered first.
func addVindex(t *testing.T, db *sql.DB, table, column string) {
	t.Helper()
	alterVSchema(t, db, "ALTER VSCHEMA ON "+table+" ADD VINDEX xxhash("+column+") USING xxhash")
	t.Cleanup(func() { alterVSchema(t, db, "ALTER VSCHEMA DROP TABLE "+table) })
}

// alterVSchema runs one ALTER VSCHEMA statement under vschemaLock.
func alterVSchema(t *testing.T, db *sql.DB, stmt string) {
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

// citusCoordinator reports whether db, reached through d, is the
// coordinator of a Citus cluster that can distribute a table: a PostgreSQL
// database with the citus extension and an active node that takes shards.
// A PostgreSQL with the extension and no such node keeps its tables as
// they are, as every other database does.
func citusCoordinator(t *testing.T, d idem.Dialect, db *sql.DB) bool {
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

// distribute spreads a table over the Citus workers by column, in the
// co-location group of colocateWith's where that is not empty.
func distribute(t *testing.T, db *sql.DB, table, column, colocateWith string) {
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
