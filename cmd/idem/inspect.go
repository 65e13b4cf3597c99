package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/idemgo/idem"
)

const inspectHelp = `Usage: idem inspect -key KEY [-scope SCOPE | -single-client] [-shard-column KIND -shard VALUE] [flags]

Inspect shows what the table holds for one idempotency key, to answer a
customer who asks whether a request went through.

` + keyHelp + `

` + shardHelp + `

The state is one of:

  finished   the request ran and committed; its response is stored, and a
             retry with the same request gets it back instead of running
  in flight  the key is claimed but no response is stored: a retry gets
             409 until the record expires. A handler that committed its
             transaction itself leaves such a record: idem settle stores
             its response, idem release -no-effect deletes it
  unfinished a multi-step request that has not reached its final
             response; it does not expire, and idem unfinished lists it
  not found  no live record: the key was never committed, it expired, or a
             transaction that holds it has not committed yet
  corrupt    the record does not match its checksum and is never replayed

With the state come when the key was claimed and when it expires, the
record's incarnation, and the stored status, header and body. The
incarnation is the number that tells this record from every other record
that the key has had or will have: after forget, release, or the expiry of
the record, the next request on the key gets another (idem's
Result.Incarnation); it is 0 for a record created before the table had the
column. A body that is printable UTF-8 is shown, up to -max bytes unless
-full is given; a binary body is only measured.

` + scopeHelp + `

Exit status:
  0  finished, in flight or unfinished
  1  an error: the database unreachable, the table missing
  2  bad command line
  3  not found
  4  corrupt

Example:
  idem inspect -dsn 'postgres://support@db.internal/shop' -key order-7f3a
  idem inspect -dsn 'postgres://support@db.internal/shop' -scope acct_42 -key order-7f3a
  idem inspect -dsn 'postgres://support@db.internal/shop' -single-client -key order-7f3a
`

// defaultBodyBytes is how much of a body inspect shows unless told
// otherwise: enough for a typical JSON answer, not a screenful of a report.
const defaultBodyBytes = 2048

func runInspect(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	var f dbFlags
	f.register(fs, true, idem.DefaultTable)
	f.registerShardColumn(fs)
	full := fs.Bool("full", false, "show the whole body, however long")
	limit := fs.Int("max", defaultBodyBytes, "show at most this many bytes of the body")
	var k keyFlags
	k.register(fs)
	rest, err := parseFlags(e, fs, inspectHelp, args)
	if err != nil {
		return err
	}
	key, err := k.stored("inspect", rest)
	if err != nil {
		return err
	}
	if ctx, err = k.withShard(ctx, "inspect", f.shardColumn); err != nil {
		return err
	}
	if *limit < 0 {
		return usageError("-max must not be negative, got %d", *limit)
	}
	_, store, db, err := f.openStore(ctx, e)
	if err != nil {
		return err
	}
	defer db.Close()

	now := e.now()
	w := e.stdout
	k.writeKey(w, key)
	res, err := store.Lookup(ctx, db, key)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		line(w, "state", "not found: no live record for this key")
		line(w, "", "it was never committed, or it expired, or a transaction holding it has not committed yet")
		if !k.scope.set && !k.single {
			line(w, "", "a key that came through idemhttp or idemgrpc needs -scope or -single-client (idem inspect -h)")
		}
		// An expired record that is still in the table answers the
		// customer's question too: the request did run, long ago.
		if raw, rerr := readRecord(ctx, store, db, key); rerr == nil && raw != nil {
			line(w, "", fmt.Sprintf("an expired record waits for purge: created %s, expired %s (%s);",
				formatTime(raw.created), formatTime(raw.expires), relative(raw.expires, now)))
			line(w, "", "it no longer counts, and a request with this key runs as a new one")
		}
		return &exitCodeError{code: exitNotFound}
	case errors.Is(err, idem.ErrCorruptRecord):
		line(w, "state", "corrupt: "+cause(err))
		if raw, rerr := readRecord(ctx, store, db, key); rerr == nil && raw != nil {
			times(w, raw.created, raw.expires, now)
			writeIncarnation(w, raw.incarnation)
			if raw.status.Valid {
				line(w, "status", strconv.FormatInt(raw.status.Int64, 10))
			}
			line(w, "size", fmt.Sprintf("header %d bytes, body %d bytes", len(raw.header), len(raw.body)))
		}
		line(w, "", "the record is never replayed: a request with this key fails until it expires or is deleted")
		return &exitCodeError{code: exitCorrupt}
	case err != nil:
		return err
	}

	if res.Outcome == idem.InFlight && res.ExpiresAt.IsZero() {
		line(w, "state", "unfinished: a multi-step request that has not reached its final response; a retry resumes it")
		line(w, "", "once its runner's lease runs out (idem unfinished shows its step and lease)")
		line(w, "created", formatTime(res.CreatedAt)+" ("+relative(res.CreatedAt, now)+")")
		line(w, "expires", "not while it is unfinished")
		writeIncarnation(w, res.Incarnation)
		return nil
	}
	if res.Outcome == idem.InFlight {
		line(w, "state", "in flight: the key is claimed but no response is stored; a retry gets 409 until it expires")
		line(w, "", "if its handler committed the transaction itself, see idem settle -h and idem release -h")
		times(w, res.CreatedAt, res.ExpiresAt, now)
		writeIncarnation(w, res.Incarnation)
		return nil
	}
	line(w, "state", "finished: the request ran and committed; a retry gets this response back")
	times(w, res.CreatedAt, res.ExpiresAt, now)
	writeIncarnation(w, res.Incarnation)
	resp := res.Response
	line(w, "status", strconv.Itoa(resp.Status)+statusName(resp.Status))
	writeHeader(w, resp.Header)
	return writeBody(w, resp.Body, *limit, *full)
}

// line writes one labelled line of inspect's output; an empty label
// continues the line above.
func line(w io.Writer, label, value string) {
	fmt.Fprintf(w, "%-8s %s\n", label, value)
}

func times(w io.Writer, created, expires, now time.Time) {
	line(w, "created", formatTime(created)+" ("+relative(created, now)+")")
	line(w, "expires", formatTime(expires)+" ("+relative(expires, now)+")")
}

// writeIncarnation writes the record's incarnation, saying what 0 means.
func writeIncarnation(w io.Writer, n int64) {
	if n == 0 {
		line(w, "record", "incarnation 0: created before the table had the column")
		return
	}
	line(w, "record", "incarnation "+strconv.FormatInt(n, 10))
}

func statusName(code int) string {
	if t := http.StatusText(code); t != "" {
		return " " + t
	}
	return ""
}

func writeHeader(w io.Writer, h http.Header) {
	if len(h) == 0 {
		line(w, "header", "(none)")
		return
	}
	label := "header"
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			if !printable([]byte(name + v)) {
				name, v = strconv.Quote(name), strconv.Quote(v)
			}
			line(w, label, name+": "+v)
			label = ""
		}
	}
}

func writeBody(w io.Writer, body []byte, limit int, full bool) error {
	switch {
	case len(body) == 0:
		line(w, "body", "(empty)")
		return nil
	case !printable(body):
		line(w, "body", fmt.Sprintf("%d bytes, not printable UTF-8: not shown", len(body)))
		return nil
	}
	shown := body
	if !full {
		shown = cut(body, limit)
	}
	line(w, "body", fmt.Sprintf("%d bytes:", len(body)))
	if _, err := w.Write(shown); err != nil {
		return err
	}
	if len(shown) > 0 && shown[len(shown)-1] != '\n' {
		fmt.Fprintln(w)
	}
	if more := len(body) - len(shown); more > 0 {
		fmt.Fprintf(w, "... %d more bytes: -full shows them all\n", more)
	}
	return nil
}

// rawRecord is a row of the table as it is, whether or not it counts.
type rawRecord struct {
	status           sql.NullInt64
	header, body     []byte
	created, expires time.Time
	incarnation      int64
}

// readRecord reads the row of key with the Store's own lookup statement, for
// what Lookup does not show: an expired record, or a corrupt one. On a
// table with a shard column, the statement binds the shard value of ctx
// too, in the place the dialect gave it. No row is a nil record.
func readRecord(ctx context.Context, store *idem.Store, db *sql.DB, key string) (*rawRecord, error) {
	q, ok := store.Queries()["Lookup"]
	if !ok {
		return nil, errors.New("the Store has no lookup statement")
	}
	var args []any
	for _, p := range q.Params {
		switch p {
		case "key":
			args = append(args, []byte(key))
		case "shard":
			v, ok := idem.ShardFrom(ctx)
			if !ok {
				return nil, errors.New("the lookup statement binds a shard value, and there is none")
			}
			args = append(args, v)
		default:
			return nil, fmt.Errorf("the lookup statement binds {%s}, not only the key and its shard value", p)
		}
	}
	var (
		r                  rawRecord
		hash, checksum     []byte
		created, expires   int64
		token, incarnation sql.NullInt64
	)
	rows, err := db.QueryContext(ctx, q.SQL, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	// The record ends with its incarnation where the dialect's statements
	// return one (dialect.Statements).
	dest := []any{&hash, &r.status, &r.header, &r.body, &checksum, &created, &expires, &token, &incarnation}
	if len(cols) < len(dest) {
		dest = dest[:len(cols)]
	}
	if err := rows.Scan(dest...); err != nil {
		return nil, err
	}
	r.created, r.expires, r.incarnation = time.UnixMicro(created), time.UnixMicro(expires), incarnation.Int64
	return &r, rows.Err()
}
