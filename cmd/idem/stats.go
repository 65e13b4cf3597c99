package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"time"

	"github.com/idemgo/idem"
)

const statsHelp = `Usage: idem stats [flags]

Stats reports the state of the table of keys:

  live keys     records that still count: a retry with their key replays
  in flight     live records without a stored response (normally 0): keys
                left unfinished, which idem settle or idem release resolves
  expired keys  records past their expiry, waiting for idem purge
  oldest key    when the oldest record was claimed: much older than the
                retention window means purge is not running
  size on disk  the table and its indexes: pg_total_relation_size on
                PostgreSQL; data_length + index_length from
                information_schema.tables on MariaDB, which InnoDB updates
                from time to time; the dbstat table on SQLite, or the whole
                database file when dbstat is missing

Counting reads every row, as count(*) does: on a table of many millions of
keys it takes a while, and it is best run against a replica.

Example:
  idem stats -dsn 'postgres://ops@db.internal/shop'
`

// tableStats is what stats measures.
type tableStats struct {
	live, inFlight, expired int64
	oldest                  time.Time // zero when the table is empty
	size                    int64
	sizeFrom                string // what size measures, and how
}

func runStats(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	rest, err := parseFlags(e, fs, statsHelp, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("stats takes no arguments, got %q", rest)
	}
	d, err := f.resolve(e, true)
	if err != nil {
		return err
	}
	db, err := d.openTable(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	now := e.now()
	st, err := d.stats(ctx, db, now)
	if err != nil {
		return err
	}
	w := e.stdout
	fmt.Fprintf(w, "table         %s (%s)\n", d.table, d.dialect.Name())
	fmt.Fprintf(w, "live keys     %d\n", st.live)
	fmt.Fprintf(w, "in flight     %d\n", st.inFlight)
	fmt.Fprintf(w, "expired keys  %d", st.expired)
	if st.expired > 0 {
		fmt.Fprint(w, ", waiting for idem purge")
	}
	fmt.Fprintln(w)
	if st.oldest.IsZero() {
		fmt.Fprintln(w, "oldest key    none: the table is empty")
	} else {
		fmt.Fprintf(w, "oldest key    created %s (%s)\n", formatTime(st.oldest), relative(st.oldest, now))
	}
	_, err = fmt.Fprintf(w, "size on disk  %s, %s\n", byteSize(st.size), st.sizeFrom)
	return err
}

// stats counts the records as of now and measures the table.
func (d *database) stats(ctx context.Context, db *sql.DB, now time.Time) (*tableStats, error) {
	ph := d.dialect.Placeholder
	t := quoteName(d.dialect, d.table)
	// One pass over the table: records whose expires_at is past count no
	// more, as Store.Lookup judges them.
	counts := `SELECT
	COUNT(CASE WHEN expires_at > ` + ph(1) + ` THEN 1 END),
	COUNT(CASE WHEN expires_at > ` + ph(2) + ` AND status IS NULL THEN 1 END),
	COUNT(CASE WHEN expires_at <= ` + ph(3) + ` THEN 1 END),
	MIN(created_at)
FROM ` + t
	us := now.UnixMicro()
	var (
		st     tableStats
		oldest sql.NullInt64
	)
	if err := db.QueryRowContext(ctx, counts, us, us, us).Scan(&st.live, &st.inFlight, &st.expired, &oldest); err != nil {
		return nil, fmt.Errorf("count the keys of %s: %w", d.table, err)
	}
	if oldest.Valid {
		st.oldest = time.UnixMicro(oldest.Int64)
	}
	var err error
	st.size, st.sizeFrom, err = d.tableSize(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("measure %s: %w", d.table, err)
	}
	return &st, nil
}

// tableSize measures the table with its indexes, each database its own way,
// and says how.
func (d *database) tableSize(ctx context.Context, db *sql.DB) (int64, string, error) {
	schema, table := splitName(d.table)
	var size int64
	switch d.dialect.Name() {
	case "postgres":
		err := db.QueryRowContext(ctx, `SELECT COALESCE(pg_total_relation_size(to_regclass($1)), 0)`,
			quoteName(d.dialect, d.table)).Scan(&size)
		return size, "table, indexes and TOAST (pg_total_relation_size)", err
	case "mysql":
		err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(data_length + index_length), 0)
FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`,
			nullString(schema), table).Scan(&size)
		return size, "table and indexes (information_schema.tables, as of InnoDB's last statistics)", err
	}
	if schema == "" {
		schema = "main"
	}
	// dbstat is compiled into modernc.org/sqlite; a SQLite built without
	// it has no finer measure than the whole file.
	err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat(?)
WHERE name IN (SELECT name FROM `+quoteName(d.dialect, schema)+`.sqlite_master WHERE tbl_name = ?)`,
		schema, table).Scan(&size)
	if err == nil {
		return size, "table and indexes (dbstat)", nil
	}
	err = db.QueryRowContext(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&size)
	return size, "the whole database file (page_count * page_size; dbstat is not available)", err
}
