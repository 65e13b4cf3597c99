package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/sqltx"
)

const statsHelp = `Usage: idem stats [-shard-column KIND] [flags]

Stats reports the state of the table of keys:

  live keys     records that still count: a retry with their key replays
  in flight     live records without a stored response (normally 0 but for
                the multi-step requests under way, which idem unfinished
                lists): keys left unfinished, which idem settle or idem
                release resolves once no request holds them
  expired keys  records past their expiry, waiting for idem purge
  oldest key    when the oldest record was claimed: much older than the
                retention window means purge is not running
  size on disk  the table and its indexes: pg_total_relation_size on
                PostgreSQL; data_length + index_length from
                information_schema.tables on MySQL and MariaDB, which InnoDB
                updates from time to time; the dbstat table on SQLite, or the
                whole database file when dbstat is missing

On a table with a shard column (idem.WithShardColumn), give its kind with
-shard-column, as the service gives it (int64, text(N), bytes(N) or uuid),
as every command that reads the table needs it: the counts are of the
records of every shard value.

Counting reads every row, as count(*) does: on a table of many millions of
keys it takes a while, and it is best run against a replica.

Exit status:
  0  reported
  1  an error: the database unreachable, the table missing
  2  bad command line

Example:
  idem stats -dsn 'postgres://ops@db.internal/shop'
`

// tableStats is what stats measures.
type tableStats struct {
	idem.Stats
	counted   bool // false when the dialect has no statement that counts the records
	size      int64
	sizeFrom  string // what size measures, and how
	sizeKnown bool   // false when the dialect cannot measure tables
}

func runStats(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	rest, err := parseFlags(e, fs, statsHelp, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("stats takes no arguments, got %q", rest)
	}
	d, store, db, err := f.openStore(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := d.stats(ctx, store, db)
	if err != nil {
		return err
	}
	return d.printStats(e.stdout, st, e.now())
}

// printStats writes what stats measured, as of now, the moment of the
// Store's clock.
func (d *database) printStats(w io.Writer, st *tableStats, now time.Time) error {
	fmt.Fprintf(w, "table         %s (%s)\n", d.table, d.dialect.Name())
	if !st.counted {
		fmt.Fprintf(w, "keys          unknown: %s\n", d.notCounting())
	} else {
		fmt.Fprintf(w, "live keys     %d\n", st.Live)
		fmt.Fprintf(w, "in flight     %d\n", st.InFlight)
		fmt.Fprintf(w, "expired keys  %d", st.Expired)
		if st.Expired > 0 {
			fmt.Fprint(w, ", waiting for idem purge")
		}
		fmt.Fprintln(w)
		if st.Oldest.IsZero() {
			fmt.Fprintln(w, "oldest key    none: the table is empty")
		} else {
			fmt.Fprintf(w, "oldest key    created %s (%s)\n", formatTime(st.Oldest), relative(st.Oldest, now))
		}
	}
	if !st.sizeKnown {
		_, err := fmt.Fprintf(w, "size on disk  unknown: %s\n", d.notInspector())
		return err
	}
	_, err := fmt.Fprintf(w, "size on disk  %s, %s\n", byteSize(st.size), st.sizeFrom)
	return err
}

// stats counts the records with the Store's own statement, as of the
// Store's clock (Store.Stats), and measures the table.
func (d *database) stats(ctx context.Context, store *idem.Store, db *sql.DB) (*tableStats, error) {
	var (
		st  tableStats
		err error
	)
	st.Stats, err = store.Stats(ctx, db)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
	case err != nil:
		return nil, fmt.Errorf("count the keys of %s: %w", d.table, err)
	default:
		st.counted = true
	}
	st.size, st.sizeFrom, st.sizeKnown, err = d.tableSize(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("measure %s: %w", d.table, err)
	}
	return &st, nil
}

// notCounting says why the command cannot count the records.
func (d *database) notCounting() string {
	return fmt.Sprintf("the %s dialect has no statement that counts them (dialect.Statements.Stats)", d.dialect.Name())
}

// tableSize measures the table with its indexes, each database its own way
// (see dialect.TableInspector), and says how. known is false when the dialect
// cannot measure tables.
func (d *database) tableSize(ctx context.Context, db *sql.DB) (size int64, how string, known bool, err error) {
	ins, ok := d.inspector()
	if !ok {
		return 0, "", false, nil
	}
	size, how, err = ins.TableSize(ctx, sqltx.Of(db), d.table)
	return size, how, true, err
}
