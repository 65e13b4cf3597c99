package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
)

const settleHelp = `Usage: idem settle -key KEY [-scope SCOPE | -single-client] -status N [-header 'Name: value' ...]
                   [-body TEXT | -body-file PATH] [-retention D]
                   [-shard-column KIND -shard VALUE] [flags]

Settle stores the response of a key left unfinished, so that every retry of
its request gets that response back instead of 409.

` + keyHelp + `

` + shardHelp + `

A key is left unfinished when a handler commits its transaction itself,
before idem has stored the response: the effect and the record of the key
are committed, the response is not, and the key answers in flight for the
whole retention window. idem stats counts such records (in flight), and
idem inspect shows one.

Find out first what the request did, from the service's own tables and
logs. If its effect happened, settle the key with the response the request
would have sent: -status, a -header for each header line, and the body from
-body or -body-file (neither: an empty body). A retry of the same request
then replays it, byte for byte, and does not run again; a different request
with the key is still refused as a mismatch. If the effect did not happen,
run idem release -no-effect instead.

` + scopeHelp + `

A multi-step request (idem unfinished lists them) that its runner left for
good, and that Resume cannot finish, is settled the same way, with the
response its client should get: what its committed phases did stays as it
is. From then on it is kept for the retention window, as a finished request
is, and then purged: give the service's retention with -retention (24h
unless told).

Settle refuses a key that a live request holds: a transaction, or a
multi-step request whose lease has not run out (idem unfinished shows it),
between its steps as well as inside one. That request is still running, and
will finish or give up by itself. On SQLite it waits for the database's
write lock, up to the busy timeout, and then gives up the same way.

Exit status:
  0  settled
  1  an error: the database unreachable, the table missing, -body-file
     unreadable
  2  bad command line
  3  no live record for the key
  5  the key's request has finished: nothing to settle
  6  a live request holds the key, or the database is busy: try again later

Example:
  idem settle -dsn 'postgres://ops@db.internal/shop' -key order-7f3a -status 201 \
      -header 'Content-Type: application/json' -body '{"order":7}'
  idem settle -dsn 'postgres://ops@db.internal/shop' -scope acct_42 -key order-7f3a \
      -status 201 -body-file order-7.json
  idem settle -dsn 'postgres://ops@db.internal/shop' -single-client -key order-7f3a -status 201
`

func runSettle(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("settle", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	var k keyFlags
	k.register(fs)
	status := fs.Int("status", 0, "the response's status (required): an HTTP status, or any number that fits in 32 bits")
	header := headerFlag{}
	fs.Var(header, "header", "a header line of the response, 'Name: value'; repeat it for each line")
	body := fs.String("body", "", "the response's body")
	bodyFile := fs.String("body-file", "", "a file that holds the response's body, byte for byte")
	retention := fs.Duration("retention", idem.DefaultRetention, "how long a settled multi-step request is kept from now: the service's retention window")
	rest, err := parseFlags(e, fs, settleHelp, args)
	if err != nil {
		return err
	}
	key, err := k.stored("settle", rest)
	if err != nil {
		return err
	}
	if ctx, err = k.withShard(ctx, "settle", f.shardColumn); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if !given["status"] {
		return usageError("settle needs -status: the status the request would have sent; run 'idem settle -h' for help")
	}
	if *status < math.MinInt32 || *status > math.MaxInt32 {
		return usageError("-status must fit in 32 bits, got %d", *status)
	}
	if given["body"] && given["body-file"] {
		return usageError("give the body with -body or -body-file, not both")
	}
	resp := idem.Response{Status: *status, Body: []byte(*body)}
	if len(header) > 0 {
		resp.Header = http.Header(header)
	}
	if given["body-file"] {
		// A file is read before the database is touched, so that a wrong
		// path fails without a connection.
		if resp.Body, err = os.ReadFile(*bodyFile); err != nil {
			return fmt.Errorf("read -body-file: %w", err)
		}
	}
	if *retention <= 0 {
		return usageError("-retention must be positive, got %v", *retention)
	}
	d, store, db, err := f.openStore(ctx, e, idem.WithRetention(*retention))
	if err != nil {
		return err
	}
	defer db.Close()

	if err := store.Settle(ctx, db, key, resp); err != nil {
		return refused(d, &k, "settle", err, refuseFinished)
	}
	w := e.stdout
	k.writeKey(w, key)
	line(w, "state", "settled: a retry of the request now gets this response back")
	line(w, "status", strconv.Itoa(resp.Status)+statusName(resp.Status))
	writeHeader(w, resp.Header)
	line(w, "size", fmt.Sprintf("header %d bytes, body %d bytes", len(codec.EncodeHeader(resp.Header)), len(resp.Body)))
	return nil
}

// headerFlag collects the -header lines of a response.
type headerFlag http.Header

func (h headerFlag) String() string { return "" }

// Set adds one 'Name: value' line. The name is canonicalised as net/http
// does for a handler's header; a line that could not be sent as it is
// replayed is refused here rather than stored.
func (h headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	if !ok || !headerName(name) {
		return errors.New("want 'Name: value', with a name that has no spaces or separators")
	}
	value = strings.TrimSpace(value)
	for _, r := range value {
		if r != '\t' && (r < ' ' || r == 0x7f) {
			return errors.New("a header value must not hold control characters")
		}
	}
	http.Header(h).Add(name, value)
	return nil
}

// headerName reports whether name is a token, as RFC 9110 defines the name
// of a field.
func headerName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}
