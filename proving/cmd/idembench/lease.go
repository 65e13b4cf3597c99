package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/codec"
)

// The lease paths are built the way lease-based idempotency libraries work,
// as middleware around the same order handler as idemhttp's (see http.go):
//
//  1. Reserve the key in a statement of its own, in autocommit: an upsert
//     that inserts the key with a lease (expires_at 30 s from now), or takes
//     over a lease that expired on a key that has no response, and returns
//     the token when it reserved. When it did not, a SELECT of the key's
//     record answers the retry: its stored response, or 409 while the first
//     request runs, or 422 when the key was used for another request.
//  2. Run the handler in a transaction of its own: BEGIN, the effect, an
//     UPDATE that stores the response under the token and keeps the key
//     for 24 hours (it must change one row, else the lease was lost and the
//     transaction rolls back), COMMIT.
//
// A new key costs the reserve, BEGIN, the effect, the UPDATE and COMMIT; a
// retry of a finished key the reserve and the SELECT. The reservation
// commits on its own, before the effect, so it survives a crash of the
// handler: that is what the lease is for.

const (
	leaseTime  = 30 * time.Second
	leaseKeep  = 24 * time.Hour
	leaseTable = `CREATE TABLE %s (
	key          bytea  PRIMARY KEY,
	request_hash bytea  NOT NULL,
	token        bigint NOT NULL,
	created_at   bigint NOT NULL,
	expires_at   bigint NOT NULL,
	status       int    NULL,
	header       bytea,
	body         bytea
)`
	leaseTableSQLite = `CREATE TABLE %s (
	key          BLOB    NOT NULL PRIMARY KEY,
	request_hash BLOB    NOT NULL,
	token        INTEGER NOT NULL,
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	status       INTEGER NULL,
	header       BLOB,
	body         BLOB
)`
	leaseTableMySQL = "CREATE TABLE %s (\n" +
		"	`key`        VARBINARY(512) NOT NULL PRIMARY KEY,\n" +
		"	request_hash VARBINARY(64)  NOT NULL,\n" +
		"	token        BIGINT         NOT NULL,\n" +
		"	created_at   BIGINT         NOT NULL,\n" +
		"	expires_at   BIGINT         NOT NULL,\n" +
		"	status       INT            NULL,\n" +
		"	header       MEDIUMBLOB     NULL,\n" +
		"	body         LONGBLOB       NULL\n" +
		") ENGINE=InnoDB"
)

// leaseSQL holds the lease statements on one lease table.
type leaseSQL struct {
	mysql bool
	// create makes the table. reserve's parameters are key, request_hash,
	// token, created_at, expires_at; lookup's key; complete's status,
	// header, body, expires_at, key, token; release's key, token.
	create, reserve, lookup, complete, release string
}

func newLeaseSQL(k *kind, table string) leaseSQL {
	t, key := k.quote(table), "key"
	q := leaseSQL{mysql: k.mysql}
	switch {
	case k.mysql:
		key = k.quote("key")
		q.create = fmt.Sprintf(leaseTableMySQL, t)
		// MySQL assigns from left to right, and later assignments see
		// earlier ones: expires_at, which the condition reads, comes last.
		taken := "expires_at <= VALUES(created_at) AND status IS NULL"
		q.reserve = fmt.Sprintf("INSERT INTO %s (%s, request_hash, token, created_at, expires_at) VALUES (%s)\n"+
			"ON DUPLICATE KEY UPDATE\n"+
			"	request_hash = IF(%[4]s, VALUES(request_hash), request_hash),\n"+
			"	token        = IF(%[4]s, VALUES(token), token),\n"+
			"	created_at   = IF(%[4]s, VALUES(created_at), created_at),\n"+
			"	expires_at   = IF(%[4]s, VALUES(expires_at), expires_at)",
			t, key, k.phs(5), taken)
	default:
		if k.param == "?" {
			q.create = fmt.Sprintf(leaseTableSQLite, t)
		} else {
			q.create = fmt.Sprintf(leaseTable, t)
		}
		q.reserve = fmt.Sprintf("INSERT INTO %s (key, request_hash, token, created_at, expires_at) VALUES (%s)\n"+
			"ON CONFLICT (key) DO UPDATE SET request_hash = EXCLUDED.request_hash, token = EXCLUDED.token,\n"+
			"	created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at\n"+
			"WHERE %[1]s.expires_at <= EXCLUDED.created_at AND %[1]s.status IS NULL\n"+
			"RETURNING token", t, k.phs(5))
	}
	q.lookup = fmt.Sprintf("SELECT request_hash, status, header, body FROM %s WHERE %s = %s", t, key, k.ph(1))
	q.complete = fmt.Sprintf("UPDATE %s SET status = %s, header = %s, body = %s, expires_at = %s WHERE %s = %s AND token = %s",
		t, k.ph(1), k.ph(2), k.ph(3), k.ph(4), key, k.ph(5), k.ph(6))
	q.release = fmt.Sprintf("DELETE FROM %s WHERE %s = %s AND token = %s AND status IS NULL", t, key, k.ph(1), k.ph(2))
	return q
}

// leaseMiddleware protects next with leases, as described above. It
// answers the same statuses as idemhttp, with plain bodies.
type leaseMiddleware struct {
	db   leaseDB
	next http.Handler
}

// leaseDB sends the lease statements through one driver interface:
// database/sql (sqlLeases, below) or pgx's own (pgxLeases, in
// nativelease.go). The statements and the middleware around them are the
// same, so that a difference between the two lease paths is the driver's.
type leaseDB interface {
	// reserve runs the reserving upsert and reports whether it reserved
	// key.
	reserve(ctx context.Context, key, hash []byte, token, now int64) (bool, error)
	// lookup reads key's record; errNoLease when there is none.
	lookup(ctx context.Context, key []byte) (leaseRecord, error)
	// inTx begins a transaction and calls serve with a context that
	// carries it, where the handler finds it (idemhttp.Tx, idempgx.Tx).
	// When serve returns the arguments of the completion, inTx runs it,
	// checks that it changed one row, and commits; when serve returns nil,
	// it rolls back.
	inTx(ctx context.Context, serve func(ctx context.Context) []any) error
	// release deletes key's unfinished record under token.
	release(ctx context.Context, key []byte, token int64) error
}

// leaseRecord is a key's record as the lookup reads it.
type leaseRecord struct {
	hash, header, body []byte
	status             sql.NullInt64
}

// errNoLease is lookup's answer for a key that has no record.
var errNoLease = errors.New("no record")

func (m *leaseMiddleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	clientKey := r.Header.Get("Idempotency-Key")
	if r.Method != http.MethodPost || clientKey == "" {
		m.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return
	}
	// The key as idemhttp stores it, so that both tables hold keys of the
	// same length.
	key := []byte(idemhttp.StoredKey("", clientKey))
	hash := idem.Fingerprint([]byte(r.Method), []byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), body)
	token := rand.Int64()
	now := time.Now().UnixMicro()

	reserved, err := m.db.reserve(ctx, key, hash, token, now)
	if err != nil {
		http.Error(w, "reserve: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !reserved {
		m.answer(w, r, key, hash)
		return
	}

	rec := httptest.NewRecorder()
	err = m.handle(ctx, rec, r, key, token, body)
	if err != nil || rec.Code >= 500 {
		// Nothing is stored: free the key for a retry, as lease libraries
		// do, rather than make it wait for the lease to expire.
		_ = m.db.release(context.WithoutCancel(ctx), key, token)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	copyResponse(w, rec.Code, rec.Header(), rec.Body.Bytes())
}

// answer answers a request whose key another request holds: the stored
// response, 409 while it runs, 422 when it was another request.
func (m *leaseMiddleware) answer(w http.ResponseWriter, r *http.Request, key, hash []byte) {
	rec, err := m.db.lookup(r.Context(), key)
	switch {
	case errors.Is(err, errNoLease):
		// Released between the two statements: the client may retry.
		http.Error(w, "the key was released; retry", http.StatusConflict)
		return
	case err != nil:
		http.Error(w, "lookup: "+err.Error(), http.StatusServiceUnavailable)
		return
	case !bytes.Equal(rec.hash, hash):
		http.Error(w, "the key was used for another request", http.StatusUnprocessableEntity)
		return
	case !rec.status.Valid:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the first request with this key is still running", http.StatusConflict)
		return
	}
	h, err := codec.DecodeHeader(rec.header)
	if err != nil {
		http.Error(w, "stored header: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set(idemhttp.ReplayedHeader, "true")
	copyResponse(w, int(rec.status.Int64), h, rec.body)
}

// handle runs next in a transaction of its own and, when its response is
// to be stored, stores it under token and commits.
func (m *leaseMiddleware) handle(ctx context.Context, rec *httptest.ResponseRecorder, r *http.Request, key []byte, token int64, body []byte) error {
	return m.db.inTx(ctx, func(ctx context.Context) []any {
		req := r.WithContext(ctx)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		m.next.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			return nil // not stored; the rollback undoes the effect
		}
		header := codec.EncodeHeader(rec.Header())
		expires := time.Now().Add(leaseKeep).UnixMicro()
		return []any{int64(rec.Code), header, rec.Body.Bytes(), expires, key, token}
	})
}

// sqlLeases are the lease statements on database/sql.
type sqlLeases struct {
	db *sql.DB
	q  leaseSQL
}

// leaseReserveArgs are the reserving upsert's arguments: the key with a
// lease of leaseTime from now.
func leaseReserveArgs(key, hash []byte, token, now int64) []any {
	return []any{key, hash, token, now, now + leaseTime.Microseconds()}
}

func (l sqlLeases) reserve(ctx context.Context, key, hash []byte, token, now int64) (bool, error) {
	args := leaseReserveArgs(key, hash, token, now)
	if l.q.mysql {
		// 1 for a row inserted, 2 for one updated, 0 for one left alone.
		res, err := l.db.ExecContext(ctx, l.q.reserve, args...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1 || n == 2, err
	}
	var got int64
	err := l.db.QueryRowContext(ctx, l.q.reserve, args...).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return reserved(got, token, err)
}

// reserved checks the token that a reserving upsert returned.
func reserved(got, token int64, err error) (bool, error) {
	switch {
	case err != nil:
		return false, err
	case got != token:
		return false, fmt.Errorf("reserved with token %d, want %d", got, token)
	}
	return true, nil
}

func (l sqlLeases) lookup(ctx context.Context, key []byte) (leaseRecord, error) {
	var rec leaseRecord
	err := l.db.QueryRowContext(ctx, l.q.lookup, key).Scan(&rec.hash, &rec.status, &rec.header, &rec.body)
	if errors.Is(err, sql.ErrNoRows) {
		err = errNoLease
	}
	return rec, err
}

func (l sqlLeases) inTx(ctx context.Context, serve func(ctx context.Context) []any) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	args := serve(idemhttp.WithTx(ctx, tx))
	if args == nil {
		return nil
	}
	res, err := tx.ExecContext(ctx, l.q.complete, args...)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	n, err := res.RowsAffected()
	if err := completed(n, err); err != nil {
		return err
	}
	return tx.Commit()
}

// completed checks the count of rows the completion changed.
func completed(n int64, err error) error {
	if err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v: the lease was lost", n, err)
	}
	return nil
}

func (l sqlLeases) release(ctx context.Context, key []byte, token int64) error {
	_, err := l.db.ExecContext(ctx, l.q.release, key, token)
	return err
}

// copyResponse sends a response held in memory.
func copyResponse(w http.ResponseWriter, status int, header http.Header, body []byte) {
	dst := w.Header()
	for name, values := range header {
		dst[name] = values
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
