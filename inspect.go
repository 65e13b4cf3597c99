package idem

import (
	"context"
	"strings"
)

// The built-in dialects answer TableInspector's questions from their
// database's catalog. MySQL and MariaDB share theirs through mysqlFamily.
var (
	_ TableInspector = postgres{}
	_ TableInspector = mysql{}
	_ TableInspector = mariadb{}
	_ TableInspector = sqlite{}
)

// splitTable splits a validated, possibly schema-qualified, table name into
// its schema, "" when it has none, and the table.
func splitTable(table string) (schema, name string) {
	if s, t, ok := strings.Cut(table, "."); ok {
		return s, t
	}
	return "", table
}

// nullIfEmpty binds "" as NULL.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TableExists asks to_regclass, which finds the table as the Store's
// statements do: on the search_path unless the name has a schema.
func (postgres) TableExists(ctx context.Context, q Querier, table string) (bool, error) {
	t, _ := quoteTable(table, '"')
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&ok)
	return ok, err
}

// TableSize is pg_total_relation_size: the table, its indexes and its
// TOAST table. A missing table measures 0.
func (postgres) TableSize(ctx context.Context, q Querier, table string) (int64, string, error) {
	t, _ := quoteTable(table, '"')
	var size int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(pg_total_relation_size(to_regclass($1)), 0)`, t).Scan(&size)
	return size, "table, indexes and TOAST (pg_total_relation_size)", err
}

// TableExists looks in information_schema.tables, in the connection's
// current database unless the name has a schema.
func (mysqlFamily) TableExists(ctx context.Context, q Querier, table string) (bool, error) {
	schema, name := splitTable(table)
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`,
		nullIfEmpty(schema), name).Scan(&ok)
	return ok, err
}

// TableSize adds data_length and index_length from
// information_schema.tables, which InnoDB updates from time to time (and
// ANALYZE TABLE at once), so it lags behind recent writes. A missing table
// measures 0.
func (mysqlFamily) TableSize(ctx context.Context, q Querier, table string) (int64, string, error) {
	schema, name := splitTable(table)
	var size int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(data_length + index_length), 0)
FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`,
		nullIfEmpty(schema), name).Scan(&size)
	return size, "table and indexes (information_schema.tables, as of InnoDB's last statistics)", err
}

// TableExists looks in the sqlite_master of the table's schema, main
// unless the name has one.
func (sqlite) TableExists(ctx context.Context, q Querier, table string) (bool, error) {
	schema, name := splitTable(table)
	master := "sqlite_master"
	if schema != "" {
		s, _ := quoteTable(schema, '"')
		master = s + ".sqlite_master"
	}
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM `+master+` WHERE type = 'table' AND name = ?`, name).Scan(&ok)
	return ok, err
}

// TableSize adds the pages of the table and its indexes from the dbstat
// virtual table, which modernc.org/sqlite compiles in; where it is missing,
// it measures the whole database file instead, and says so. A missing table
// measures 0.
func (sqlite) TableSize(ctx context.Context, q Querier, table string) (int64, string, error) {
	schema, name := splitTable(table)
	if schema == "" {
		schema = "main"
	}
	s, _ := quoteTable(schema, '"')
	var size int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat(?)
WHERE name IN (SELECT name FROM `+s+`.sqlite_master WHERE tbl_name = ?)`,
		schema, name).Scan(&size)
	if err == nil {
		return size, "table and indexes (dbstat)", nil
	}
	err = q.QueryRowContext(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&size)
	return size, "the whole database file (page_count * page_size; dbstat is not available)", err
}
