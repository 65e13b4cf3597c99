package idem_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
)

// noopConnector opens connections that answer a Store's statements at once,
// without a database, so that a benchmark measures what Do costs in Go: the
// claim returns one row (claimed, or a finished record to replay), the
// lookup the same record, and the completion, as the claim's own writes and
// lock-wait statements where the dialect has them, affects one row. Where
// the dialect has a ClaimLost, a replay goes as on its database: the claim
// returns no row, and ClaimLost the record. Anything else fails.
type noopConnector struct {
	claim, claimWrite, claimLost, lookup idem.StatementText
	execs                                map[string]bool // the statements that affect one row
	// replay makes the claim lose to a finished record of hash and resp.
	replay bool
	// record is the finished record a replay returns: request_hash,
	// status, header, body, checksum, created_at, expires_at, token,
	// incarnation.
	record [9]driver.Value
}

// newNoopConnector answers store's statements; with replay set, it answers
// the claim with a finished record of key, hash and resp instead.
func newNoopConnector(store *idem.Store, replay bool, key string, hash []byte, resp idem.Response) *noopConnector {
	qs := store.Queries()
	c := &noopConnector{claim: qs["Claim"], claimWrite: qs["ClaimWrite"], claimLost: qs["ClaimLost"], lookup: qs["Lookup"], execs: map[string]bool{}, replay: replay}
	for _, name := range []string{"Complete", "ClaimWrite"} {
		if q, ok := qs[name]; ok {
			c.execs[q.SQL] = true
		}
	}
	header := codec.EncodeHeader(resp.Header)
	sum := codec.Checksum([]byte(key), hash, int64(resp.Status), header, resp.Body)
	c.record = [9]driver.Value{hash, int64(resp.Status), header, resp.Body, sum[:], int64(1), int64(1) << 62, int64(1), int64(4711)}
	return c
}

func (c *noopConnector) Connect(context.Context) (driver.Conn, error) { return &noopConn{c: c}, nil }
func (c *noopConnector) Driver() driver.Driver                        { return noopDriver{c} }

type noopDriver struct{ c *noopConnector }

func (d noopDriver) Open(string) (driver.Conn, error) { return &noopConn{c: d.c}, nil }

// noopConn answers one connection's statements. written holds the
// arguments of the claim's write, where the dialect separates it, for the
// claim's read that follows.
type noopConn struct {
	c       *noopConnector
	written []driver.NamedValue
}

var errNoop = errors.New("noop driver: unexpected statement")

func (*noopConn) Prepare(string) (driver.Stmt, error) { return nil, errNoop }
func (*noopConn) Close() error                        { return nil }
func (cn *noopConn) Begin() (driver.Tx, error)        { return cn, nil }
func (cn *noopConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	return cn, nil
}
func (*noopConn) Commit() error   { return nil }
func (*noopConn) Rollback() error { return nil }

func (cn *noopConn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	switch query {
	case cn.c.claim.SQL:
		r := &noopRows{}
		if cn.c.replay && cn.c.claimLost.SQL != "" {
			r.done = true
			return r, nil
		}
		if cn.c.replay {
			r.row[0], r.row[1] = false, false
			copy(r.row[2:], cn.c.record[:])
			return r, nil
		}
		// The record the claim wrote: the request hash and the times it
		// was given.
		r.row[0], r.row[1] = true, false
		r.fill(cn.c.claimWrite.Params, cn.written)
		r.fill(cn.c.claim.Params, args)
		return r, nil
	case cn.c.claimLost.SQL:
		r := &noopRows{}
		r.row[0], r.row[1] = false, false
		copy(r.row[2:], cn.c.record[:])
		return r, nil
	case cn.c.lookup.SQL:
		r := &noopRows{record: true}
		copy(r.row[:], cn.c.record[:])
		return r, nil
	}
	return nil, errNoop
}

func (cn *noopConn) ExecContext(_ context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if query == cn.c.claimWrite.SQL {
		cn.written = append(cn.written[:0], args...)
	}
	if cn.c.execs[query] {
		return driver.RowsAffected(1), nil
	}
	return nil, errNoop
}

// claimColumns are the columns of a claim; a lookup returns the last nine.
var claimColumns = []string{"claimed", "busy", "request_hash", "status", "header", "body", "checksum", "created_at", "expires_at", "token", "incarnation"}

// fill sets the columns of the record that the claim wrote from the
// arguments of a statement whose parameters are params: the request hash,
// the times, the token and the incarnation it was given.
func (r *noopRows) fill(params []string, args []driver.NamedValue) {
	for i, name := range params {
		if i >= len(args) {
			return
		}
		switch name {
		case "request_hash":
			r.row[2] = args[i].Value
		case "created_at":
			r.row[7] = args[i].Value
		case "expires_at":
			r.row[8] = args[i].Value
		case "token":
			r.row[9] = args[i].Value
		case "incarnation":
			r.row[10] = args[i].Value
		}
	}
}

// noopRows is one row of a claim, or of a lookup when record is set.
type noopRows struct {
	row    [11]driver.Value
	record bool
	done   bool
}

func (r *noopRows) Columns() []string {
	if r.record {
		return claimColumns[2:]
	}
	return claimColumns
}

func (*noopRows) Close() error { return nil }

func (r *noopRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	copy(dest, r.row[:len(dest)])
	return nil
}
