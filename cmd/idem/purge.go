package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemgo/idem"
)

const purgeHelp = `Usage: idem purge [-batch N] [-shard-column KIND] [flags]

Purge deletes the records whose retention window has passed, -batch at a
time, each batch a short statement of its own, so that it never holds many
locks for long and the service can keep claiming keys meanwhile. Expired
records no longer count, so deleting them changes no answer; it keeps the
table and its index small. Run it from cron or a scheduled job, as often as
you like. On a table with a shard column (idem.WithShardColumn), give its
kind with -shard-column, as the service gives it (int64, text(N), bytes(N)
or uuid): purge then deletes each expired record by its shard value and
key.

When stderr is a terminal, a progress line shows how many of the expired
records are gone. At the end, a summary says how many were deleted, in how
long. Interrupted (Ctrl-C), it stops at once, undoing only the batch at
hand, and says how many it had deleted.

Exit status:
  0  every expired record deleted
  1  an error, or interrupted: the database unreachable, the table missing;
     what was deleted before stays deleted, and the next run goes on
  2  bad command line

Example:
  IDEM_DSN='postgres://ops@db.internal/shop' idem purge -batch 5000
`

// defaultBatch is small enough that one batch holds its locks for
// milliseconds, large enough that a million records take a few hundred
// statements.
const defaultBatch = 1000

// progressEvery is how often the progress line is redrawn.
const progressEvery = 500 * time.Millisecond

func runPurge(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("purge", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	batch := fs.Int("batch", defaultBatch, "records deleted per statement")
	rest, err := parseFlags(e, fs, purgeHelp, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError("purge takes no arguments, got %q", rest)
	}
	if *batch <= 0 {
		return usageError("-batch must be positive, got %d", *batch)
	}
	d, store, db, err := f.openStore(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()

	start := time.Now()
	var stopProgress func()
	if e.terminal {
		stopProgress = showProgress(ctx, store, db, d.table, e.stderr, start)
	}
	n, err := store.Purge(ctx, db, *batch)
	elapsed := time.Since(start)
	if stopProgress != nil {
		stopProgress()
	}
	verb := "purged"
	if err != nil {
		verb = "stopped after purging"
	}
	fmt.Fprintf(e.stdout, "%s %d expired keys from %s in %s (%s)\n", verb, n, d.table, roundSpan(elapsed), rate(n, elapsed))
	return err
}

// roundSpan keeps three or four significant digits of a short span.
func roundSpan(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second / 10)
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "- rows/s"
	}
	return fmt.Sprintf("%.0f rows/s", float64(n)/d.Seconds())
}

// showProgress redraws a progress line on w until the returned function is
// called, which clears it. Store.Purge does not report its batches, so the
// line counts what remains of the expired records with Store.CountExpired,
// which reads the index on expires_at; where the dialect cannot count them,
// or the first count fails, there is no line, and a later count that fails
// only skips a redraw.
func showProgress(ctx context.Context, store *idem.Store, db *sql.DB, table string, w io.Writer, start time.Time) (stop func()) {
	remaining := func() (int64, bool) {
		n, err := store.CountExpired(ctx, db)
		return n, err == nil
	}
	total, ok := remaining()
	if !ok {
		return func() {}
	}
	draw := func(left int64) {
		done := max(total-left, 0)
		pct := 100.0
		if total > 0 {
			pct = 100 * float64(done) / float64(total)
		}
		// \r returns to the start of the line, ESC [K clears what a
		// longer line left behind.
		fmt.Fprintf(w, "\rpurging %s: %d of %d expired keys deleted (%.0f%%), %s\x1b[K",
			table, done, total, pct, rate(done, time.Since(start)))
	}
	draw(total)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if left, ok := remaining(); ok {
					draw(left)
				}
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
		fmt.Fprint(w, "\r\x1b[K")
	}
}
