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
	"fmt"
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
	if err := ShardTable(context.Background(), db, table, column); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := UnshardTable(context.Background(), db, table); err != nil {
			t.Error(err)
		}
	})
}

// ShardTable shards table on Vitess's keyspace by column with the
// keyspace's xxhash vindex: AddVindex for a program that is no test, which
// takes the table out of the VSchema with UnshardTable.
func ShardTable(ctx context.Context, db *sql.DB, table, column string) error {
	return alterVSchema(ctx, db, "ALTER VSCHEMA ON "+table+" ADD VINDEX xxhash("+column+") USING xxhash")
}

// UnshardTable takes table out of the keyspace's VSchema.
func UnshardTable(ctx context.Context, db *sql.DB, table string) error {
	return alterVSchema(ctx, db, "ALTER VSCHEMA DROP TABLE "+table)
}

// alterVSchema runs one ALTER VSCHEMA statement under vschemaLock.
func alterVSchema(ctx context.Context, db *sql.DB, stmt string) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('"+vschemaLock+"', 60)").Scan(&got); err != nil || got.Int64 != 1 {
		return fmt.Errorf("GET_LOCK(%s) = %v, %v", vschemaLock, got, err)
	}
	defer func() {
		if _, rerr := conn.ExecContext(ctx, "SELECT RELEASE_LOCK('"+vschemaLock+"')"); rerr != nil && err == nil {
			err = fmt.Errorf("RELEASE_LOCK(%s): %w", vschemaLock, rerr)
		}
	}()
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
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
