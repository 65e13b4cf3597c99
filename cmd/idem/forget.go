package main

import (
	"context"
	"flag"

	"github.com/idemgo/idem"
)

const forgetHelp = `Usage: idem forget -key KEY [-scope SCOPE | -single-client] [-shard-column KIND -shard VALUE] [flags]

Forget deletes the record of a finished key before its retention window
ends, so that the key may be sent again: the next request with it runs as a
new request and does its work, where it would otherwise get the stored
response back, or be refused as a mismatch if its body differs.

` + keyHelp + `

` + shardHelp + `

Forget a key when its client means to use it again, for a request of its
own, and only once the first request's answer has reached the client: a
retry of the first request that arrives after forget runs again, and does
its work a second time. idem inspect shows the record that forget deletes.

` + scopeHelp + `

Forget refuses a key that a live request holds: a transaction, or a
multi-step request whose lease has not run out (idem unfinished shows it),
between its steps as well as inside one. It refuses a key left unfinished
that no one holds: that is for idem settle or idem release, once you know
what its request did. On SQLite it waits for the database's write lock, up
to the busy timeout, and then gives up the same way.

Exit status:
  0  forgotten
  1  an error: the database unreachable, the table missing
  2  bad command line
  3  no live record for the key
  6  a live request holds the key, or the database is busy: try again later
  8  the key's request has not finished: nothing forgotten; settle or
     release it

Example:
  idem forget -dsn 'postgres://ops@db.internal/shop' -key order-7f3a
  idem forget -dsn 'postgres://ops@db.internal/shop' -scope acct_42 -key order-7f3a
  idem forget -dsn 'postgres://ops@db.internal/shop' -single-client -key order-7f3a
`

func runForget(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("forget", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	var k keyFlags
	k.register(fs)
	rest, err := parseFlags(e, fs, forgetHelp, args)
	if err != nil {
		return err
	}
	key, err := k.stored("forget", rest)
	if err != nil {
		return err
	}
	if ctx, err = k.withShard(ctx, "forget", f.shardColumn); err != nil {
		return err
	}
	d, store, db, err := f.openStore(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()

	if err := store.Forget(ctx, db, key); err != nil {
		return refused(d, &k, "forget", err, refuseUnfinished)
	}
	w := e.stdout
	k.writeKey(w, key)
	line(w, "state", "forgotten: the record is deleted; the next request with this key runs as a new one")
	return nil
}
