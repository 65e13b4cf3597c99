package dialect

import (
	"strconv"
	"strings"
)

// QuoteTable quotes a table name that idem.WithTable accepted, for the
// Schema and Statements of a dialect: each part of a schema-qualified name
// is quoted on its own with quote, so that "app.keys" becomes "app"."keys"
// with a double quote and `app`.`keys` with a backquote. Quoting keeps a
// name that is a reserved word (a table called "order") from breaking the
// SQL, and keeps the case of the name where the database folds unquoted
// names.
func QuoteTable(table string, quote byte) string {
	parts := strings.Split(table, ".")
	for i, part := range parts {
		parts[i] = string(quote) + part + string(quote)
	}
	return strings.Join(parts, ".")
}

// NumberedPlaceholder returns prefix followed by n, such as "$3" or "?3": the
// Placeholder of a dialect whose markers are numbered.
func NumberedPlaceholder(prefix string, n int) string {
	return prefix + strconv.Itoa(n)
}

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
