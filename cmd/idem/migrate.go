package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/idemgo/idem"
)

const migrateHelp = `Usage: idem migrate [-dsn DSN] [-dialect DIALECT] [-table NAME] [-shard-column KIND]

Migrate creates the table of keys and its index on expires_at if they are
missing, and adds to a table that an earlier version of idem made what it
lacks, keeping its records (see "Upgrading the table" in idem's
docs/operations.md); run again, it does nothing. To review the statements
first, or to hand them to a migration tool, use idem schema.

With -shard-column KIND, the table it creates has a shard column,
shard_key, of the type that the dialect gives KIND (int64, text(N),
bytes(N) or uuid, as the service gives idem.WithShardColumn), as idem
schema -shard-column prints it. It neither adds the column to a table that
is there already nor changes its type: before it changes anything, it
refuses, with exit status 2, a table without the column or with a column
of another type, and a table with one when -shard-column is missing (see
"Moving a table to a shard column" in docs/operations.md).

For SQLite, migrate creates the database file if it is missing.

Exit status:
  0  the table and its index are there
  1  an error: the database unreachable, a statement refused
  2  bad command line, or a -shard-column that does not match the table

Example:
  IDEM_DSN='postgres://app@db.internal/shop' idem migrate
  idem migrate -dsn 'app:secret@tcp(db.internal:3306)/shop' -table billing_keys
`

func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	rest, err := parseFlags(e, fs, migrateHelp, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("migrate takes no arguments, got %q", rest)
	}
	d, err := f.resolve(e, true)
	if err != nil {
		return err
	}
	store, err := d.store()
	if err != nil {
		return err
	}
	db, err := d.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	existed, known, err := d.tableExists(ctx, db)
	if err != nil {
		return err
	}
	if existed {
		// A table that is there must be the one -shard-column
		// describes before Migrate adds to it: the MySQL family's
		// claim procedures, for one, are of the table's kind.
		if err := d.checkShard(ctx, db); err != nil {
			return err
		}
	}
	if err := store.Migrate(ctx, db); err != nil {
		if errors.Is(err, idem.ErrInvalidArgument) {
			// Migrate's own check of the shard column, on a table
			// that the command could not look at first.
			return &exitCodeError{code: exitUsage, err: err}
		}
		return err
	}
	switch {
	case !known:
		_, err = fmt.Fprintf(e.stdout, "table %s and its index are in place (%s); whether they were there before is unknown: %s\n",
			d.table, d.dialect.Name(), d.notInspector())
	case existed:
		_, err = fmt.Fprintf(e.stdout, "table %s already exists (%s); its index is in place\n", d.table, d.dialect.Name())
	default:
		_, err = fmt.Fprintf(e.stdout, "created table %s and its index (%s)\n", d.table, d.dialect.Name())
	}
	return err
}
