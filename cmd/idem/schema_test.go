package main

import (
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// Schema prints the Store's own statements, each a paragraph ending in a
// semicolon, and connects to nothing.
func TestSchema(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flag    string
		dialect idem.Dialect
		table   string
	}{
		{"postgres", idem.Postgres(), ""},
		{"mysql", idem.MySQL(), ""},
		{"mariadb", idem.MariaDB(), ""},
		{"sqlite", idem.SQLite(), ""},
		{"postgres", idem.Postgres(), "billing.keys"},
		{"mariadb", idem.MariaDB(), "billing.keys"},
		{"sqlite", idem.SQLite(), "Keys_2"},
	} {
		args := []string{"schema", "-dialect", c.flag}
		opts := []idem.Option{}
		if c.table != "" {
			args = append(args, "-table", c.table)
			opts = append(opts, idem.WithTable(c.table))
		}
		store, err := idem.New(c.dialect, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		for i, stmt := range store.Schema() {
			if i > 0 {
				want.WriteString("\n")
			}
			want.WriteString(stmt + ";\n")
		}
		r := runCmd(t, args...)
		r.wantCode(t, exitOK)
		if r.stdout != want.String() {
			t.Errorf("idem %s:\n%s\nwant:\n%s", strings.Join(args, " "), r.stdout, want.String())
		}
		if n := len(strings.Split(strings.TrimSpace(r.stdout), "\n\n")); n != len(store.Schema()) {
			t.Errorf("idem %s: %d paragraphs, want %d", strings.Join(args, " "), n, len(store.Schema()))
		}
	}
}
