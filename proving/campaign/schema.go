package campaign

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The campaign's own tables beside the Store's: the effects that the
// requests' work writes in the Store's transactions, and the audit that
// triggers keep of every change to the Store's table, so that the checker
// knows what each record held and when it ended, also after Purge or an
// operator deleted it. Their names are the Store's table's, with a suffix.
func effectsTable(table string) string { return table + "_effects" }
func auditTable(table string) string   { return table + "_audit" }

// nowMicros is the database's clock, in microseconds since the epoch, as
// SQL of family: the clock the audit and the effects are stamped with.
func nowMicros(family string) string {
	switch family {
	case "postgres":
		return `(extract(epoch from clock_timestamp()) * 1000000)::bigint`
	case "mysql":
		return `CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)`
}

// placeholders returns n placeholders of family, from the first.
func placeholders(family string, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "?"
		if family == "postgres" {
			ps[i] = fmt.Sprintf("$%d", i+1)
		}
	}
	return strings.Join(ps, ", ")
}

// auditable reports whether the campaign can keep an audit on family's
// servers by dialect name: TiDB and Vitess have no triggers.
func auditable(dialect string) bool { return dialect != "tidb" && dialect != "vitess" }

// createTables makes the effects table and, where triggers exist, the
// audit table and its triggers on table.
func createTables(ctx context.Context, db *sql.DB, family, dialect, table string) error {
	bytes, text, serial := "BLOB", "TEXT", "INTEGER PRIMARY KEY AUTOINCREMENT"
	switch family {
	case "postgres":
		bytes, serial = "bytea", "bigserial PRIMARY KEY"
	case "mysql":
		bytes, text, serial = "LONGBLOB", "LONGTEXT", "BIGINT AUTO_INCREMENT PRIMARY KEY"
	}
	stmts := []string{fmt.Sprintf(`CREATE TABLE %s (
	seq %s,
	stored_key %s NOT NULL,
	shard BIGINT NOT NULL,
	inc BIGINT NOT NULL,
	phase VARCHAR(16) NOT NULL,
	op VARCHAR(64) NOT NULL,
	status INT NOT NULL,
	header %s NOT NULL,
	body %s NOT NULL,
	at BIGINT NOT NULL)`, effectsTable(table), serial, bytes, text, bytes)}
	if auditable(dialect) {
		stmts = append(stmts, fmt.Sprintf(`CREATE TABLE %s (
	seq %s,
	at BIGINT NOT NULL,
	kind CHAR(1) NOT NULL,
	stored_key %s NOT NULL,
	shard BIGINT NOT NULL,
	old_inc BIGINT, old_status INT, old_expires BIGINT, old_lease BIGINT, old_phase %s,
	new_inc BIGINT, new_status INT, new_body %s, new_expires BIGINT, new_lease BIGINT, new_phase %s)`,
			auditTable(table), serial, bytes, text, bytes, text))
		stmts = append(stmts, auditTriggers(family, table)...)
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%w\n%s", err, q)
		}
	}
	return nil
}

// auditTriggers returns the statements that make table's triggers, which
// write each insert, update and delete of a record into the audit, with
// what the record held before and after.
func auditTriggers(family, table string) []string {
	const oldCols = "old_inc, old_status, old_expires, old_lease, old_phase"
	const newCols = "new_inc, new_status, new_body, new_expires, new_lease, new_phase"
	old := func(p string) string {
		return fmt.Sprintf("%[1]s.incarnation, %[1]s.status, %[1]s.expires_at, %[1]s.lease_until, %[1]s.phase", p)
	}
	nw := func(p string) string {
		return fmt.Sprintf("%[1]s.incarnation, %[1]s.status, %[1]s.body, %[1]s.expires_at, %[1]s.lease_until, %[1]s.phase", p)
	}
	audit, now := auditTable(table), nowMicros(family)
	insert := func(kind, row string, cols, vals string) string {
		return fmt.Sprintf(`INSERT INTO %s (at, kind, stored_key, shard, %s) VALUES (%s, '%s', %s.%s, %s.shard_key, %s)`,
			audit, cols, now, kind, row, quoteKey(family), row, vals)
	}
	ins := insert("I", "NEW", newCols, nw("NEW"))
	upd := fmt.Sprintf(`INSERT INTO %s (at, kind, stored_key, shard, %s, %s) VALUES (%s, 'U', NEW.%s, NEW.shard_key, %s, %s)`,
		audit, oldCols, newCols, now, quoteKey(family), old("OLD"), nw("NEW"))
	del := insert("D", "OLD", oldCols, old("OLD"))
	switch family {
	case "postgres":
		fn := table + "_audit_fn"
		return []string{
			fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN %s;
	ELSIF TG_OP = 'UPDATE' THEN %s;
	ELSE %s;
	END IF;
	RETURN NULL;
END $$`, fn, ins, upd, del),
			fmt.Sprintf(`CREATE TRIGGER %s_audit AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s()`, table, table, fn),
		}
	case "mysql":
		return []string{
			fmt.Sprintf(`CREATE TRIGGER %s_ai AFTER INSERT ON %s FOR EACH ROW %s`, table, table, ins),
			fmt.Sprintf(`CREATE TRIGGER %s_au AFTER UPDATE ON %s FOR EACH ROW %s`, table, table, upd),
			fmt.Sprintf(`CREATE TRIGGER %s_ad AFTER DELETE ON %s FOR EACH ROW %s`, table, table, del),
		}
	}
	return []string{
		fmt.Sprintf(`CREATE TRIGGER %s_ai AFTER INSERT ON %s BEGIN %s; END`, table, table, ins),
		fmt.Sprintf(`CREATE TRIGGER %s_au AFTER UPDATE ON %s BEGIN %s; END`, table, table, upd),
		fmt.Sprintf(`CREATE TRIGGER %s_ad AFTER DELETE ON %s BEGIN %s; END`, table, table, del),
	}
}

// quoteKey is the Store's key column as family's SQL names it.
func quoteKey(family string) string {
	if family == "mysql" {
		return "`key`"
	}
	return `"key"`
}
