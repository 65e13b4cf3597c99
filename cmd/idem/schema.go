package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/idemgo/idem"
)

const schemaHelp = `Usage: idem schema -dialect DIALECT [-table NAME] [-shard-column KIND]

Schema prints the statements that create the table of keys and its index,
each ending with a semicolon and separated by a blank line, for a migration
tool such as goose or golang-migrate. They are the statements that idem
migrate runs, and both do nothing when the table is already there. Schema
does not connect to a database. The mysql and mariadb dialects use the same
table, so either prints it.

With -shard-column KIND, the table has a shard column, shard_key, of the
type that the dialect gives KIND (int64, text(N), bytes(N) or uuid), and
the primary key (shard_key, key): the table of a Store made with
idem.WithShardColumn of the same kind (docs/scaling.md).

Exit status:
  0  printed
  1  an error: the statements could not be written
  2  bad command line: no dialect, a bad -table or -shard-column

Example:
  idem schema -dialect postgres > migrations/00042_idempotency_keys.up.sql
  idem schema -dialect mysql -table idem_keys -shard-column int64
`

func runSchema(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("schema", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, false, idem.DefaultTable)
	f.registerShardColumn(fs)
	rest, err := parseFlags(e, fs, schemaHelp, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("schema takes no arguments, got %q", rest)
	}
	d, err := f.resolve(e, false)
	if err != nil {
		return err
	}
	store, err := d.store()
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(e.stdout, schemaText(store.Schema()))
	return err
}

// schemaText writes each statement as a paragraph of its own.
func schemaText(stmts []string) string {
	var b strings.Builder
	for i, s := range stmts {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s)
		b.WriteString(";\n")
	}
	return b.String()
}
