package main

import (
	"context"
	"flag"

	"github.com/idemgo/idem"
)

const releaseHelp = `Usage: idem release -key KEY [-scope SCOPE | -single-client] -no-effect [-phases-undone]
                    [-shard-column KIND -shard VALUE] [flags]

Release deletes the record of a key left unfinished, so that the next
request with the key runs as a new one and does the work.

` + keyHelp + `

` + shardHelp + `

A key is left unfinished when a handler commits its transaction itself,
before idem has stored the response: the key answers in flight for the
whole retention window. idem stats counts such records (in flight), and
idem inspect shows one.

Release only a key whose request had no effect: no order placed, no payment
taken, as the service's own tables and logs show. If the effect did happen,
releasing the key invites the double effect that idempotency keys exist to
prevent: the client's retry runs again and places a second order. Settle
such a key with its response instead (idem settle -h). Release refuses to
run without -no-effect, which says that you have checked.

` + scopeHelp + `

Release refuses a key that a live request holds, and a finished key, as
settle does. A multi-step request (idem unfinished lists them) is live while
its lease runs, between its steps as well as inside one: wait until idem
unfinished shows its lease as run out.

A multi-step request that has committed a phase (idem unfinished shows its
step) has effects: its first phases wrote to the service's tables, and its
calls may have reached other systems. Release refuses it, since the retry
would run those phases again. Settle it instead, or, once you have undone
what its committed phases and calls did, release it with -phases-undone.

Exit status:
  0  released
  1  an error: the database unreachable, the table missing
  2  bad command line, or no -no-effect
  3  no live record for the key
  5  the key's request has finished: nothing to release
  6  a live request holds the key, or the database is busy: try again later
  7  a multi-step request past its first phase, without -phases-undone:
     nothing released

Example:
  idem release -dsn 'postgres://ops@db.internal/shop' -key order-7f3a -no-effect
  idem release -dsn 'postgres://ops@db.internal/shop' -scope acct_42 -key order-7f3a -no-effect
  idem release -dsn 'postgres://ops@db.internal/shop' -single-client -key order-7f3a -no-effect
`

func runRelease(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	var k keyFlags
	k.register(fs)
	noEffect := fs.Bool("no-effect", false, "confirm that the request's effect did not happen (required)")
	undone := fs.Bool("phases-undone", false, "confirm that the effects of a multi-step request's committed phases and calls were undone")
	rest, err := parseFlags(e, fs, releaseHelp, args)
	if err != nil {
		return err
	}
	key, err := k.stored("release", rest)
	if err != nil {
		return err
	}
	if ctx, err = k.withShard(ctx, "release", f.shardColumn); err != nil {
		return err
	}
	if !*noEffect {
		// Refused before the database is opened: without the flag,
		// nothing is read or changed.
		return usageError("release needs -no-effect: release only a key whose request had no effect, since the next request with it runs again; if the effect happened, settle the key instead (idem settle -h)")
	}
	d, store, db, err := f.openStore(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()

	release := store.ReleaseWithoutEffect
	if *undone {
		release = store.ReleaseUndone
	}
	if err := release(ctx, db, key); err != nil {
		return refused(d, &k, "release", err, refuseFinished, refusePhases)
	}
	w := e.stdout
	k.writeKey(w, key)
	line(w, "state", "released: the record is deleted; the next request with this key runs as a new one")
	return nil
}
