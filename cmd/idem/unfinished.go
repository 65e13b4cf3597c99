package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/idemgo/idem"
)

const unfinishedHelp = `Usage: idem unfinished [-age D] [-limit N] [-resume-age D] [-shard-column KIND] [flags]

Unfinished lists the multi-step requests (idem's Store.Run) that have not
reached their final response, oldest first: each key, the last step it
committed (its recovery point; "-" when none has committed yet), when it
began, its lease, when the service's Resume takes it, and the incarnation
of its record (idem inspect -h; 0 for a record created before the table
had the column). A request whose lease is held has a runner at work; a
request whose lease has run out waits for its client's retry or for
Resume, which resumes it after its recovery point.

Resume takes a request once it is old enough, a minute unless the service
gives Resume another age with idem.ResumeOlderThan: give that age with
-resume-age, and RESUMER says when the service's Resume takes each request
("takes it next": the next time it runs). Resume leaves a request alone
while its lease runs, too, and after it failed to finish the request it
backs off: 10 seconds, then twice as long after each failure, up to 15
minutes. Ages are by this machine's clock, leases and back-offs by the
database's.

-age leaves out the requests younger than it; -limit says how many to show.

On a table with a shard column (idem.WithShardColumn), give its kind with
-shard-column, as the service gives it (int64, text(N), bytes(N) or uuid):
a SHARD column comes first, each request's shard value as settle, release
and forget take it with -shard: an int64's digits, a text quoted as keys
are, a byte string's hex digits, a UUID in the 8-4-4-4-12 form.

Exit status:
  0  listed, also when there is none
  1  an error: the database unreachable, the table missing
  2  bad command line

Example:
  IDEM_DSN='postgres://ops@db.internal/shop' idem unfinished -age 5m
  IDEM_DSN='postgres://ops@db.internal/shop' idem unfinished -resume-age 10s
`

// defaultUnfinishedLimit is a screenful.
const defaultUnfinishedLimit = 50

func runUnfinished(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("unfinished", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	age := fs.Duration("age", 0, "list only the requests at least this old")
	limit := fs.Int("limit", defaultUnfinishedLimit, "list at most this many requests")
	resumeAge := fs.Duration("resume-age", idem.DefaultResumeAge, "the age at which the service's Resume takes a request: its\n"+
		"idem.ResumeOlderThan")
	rest, err := parseFlags(e, fs, unfinishedHelp, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usageError("unfinished takes no arguments, got %q", rest)
	case *limit <= 0:
		return usageError("-limit must be positive, got %d", *limit)
	case *age < 0:
		return usageError("-age must not be negative, got %v", *age)
	case *resumeAge < 0:
		return usageError("-resume-age must not be negative, got %v", *resumeAge)
	}
	d, store, db, err := f.openStore(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()

	list, err := store.Unfinished(ctx, db, *age, *limit)
	if err != nil {
		return err
	}
	now := e.now()
	if len(list) == 0 {
		fmt.Fprintf(e.stdout, "no unfinished multi-step requests in %s%s\n", d.table, olderThan(*age))
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	// On a table with a shard column, a record is its shard value and its
	// key: the SHARD column says which, as -shard of settle, release and
	// forget takes it.
	sharded := d.sharded()
	if sharded {
		fmt.Fprint(w, "SHARD\t")
	}
	fmt.Fprintln(w, "KEY\tSTEP\tBEGAN\tLEASE\tRESUMER\tINCARNATION")
	for _, u := range list {
		if sharded {
			fmt.Fprintf(w, "%s\t", shardText(u.Shard, d.shardKind))
		}
		step := u.Phase
		if step == "" {
			step = "-"
		}
		// By the database's clock, which decides leases, not this
		// machine's.
		lease := "ran out " + span(-u.LeaseLeft) + " ago"
		if u.LeaseLeft > 0 {
			lease = "held, runs out in " + span(u.LeaseLeft)
		}
		resumer := "takes it next"
		if in := u.ResumeInOlderThan(*resumeAge); in > 0 {
			resumer = "in " + span(in)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", strconv.Quote(u.Key), step, relative(u.CreatedAt, now), lease, resumer, u.Incarnation)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(list) == *limit {
		fmt.Fprintf(e.stdout, "(the %d oldest; -limit shows more)\n", *limit)
	}
	return nil
}

// olderThan says what -age left out, if anything.
func olderThan(age time.Duration) string {
	if age == 0 {
		return ""
	}
	return " older than " + span(age)
}
