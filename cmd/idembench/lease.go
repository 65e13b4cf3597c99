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
	db   *sql.DB
	q    leaseSQL
	next http.Handler
}

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

	reserved, err := m.reserve(ctx, key, hash, token, now)
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
		_, _ = m.db.ExecContext(context.WithoutCancel(ctx), m.q.release, key, token)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	copyResponse(w, rec.Code, rec.Header(), rec.Body.Bytes())
}

// reserve runs the reserving upsert and reports whether it reserved key.
func (m *leaseMiddleware) reserve(ctx context.Context, key, hash []byte, token, now int64) (bool, error) {
	args := []any{key, hash, token, now, now + leaseTime.Microseconds()}
	if m.q.mysql {
		// 1 for a row inserted, 2 for one updated, 0 for one left alone.
		res, err := m.db.ExecContext(ctx, m.q.reserve, args...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1 || n == 2, err
	}
	var got int64
	err := m.db.QueryRowContext(ctx, m.q.reserve, args...).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	case got != token:
		return false, fmt.Errorf("reserved with token %d, want %d", got, token)
	}
	return true, nil
}

// answer answers a request whose key another request holds: the stored
// response, 409 while it runs, 422 when it was another request.
func (m *leaseMiddleware) answer(w http.ResponseWriter, r *http.Request, key, hash []byte) {
	var (
		storedHash, header, body []byte
		status                   sql.NullInt64
	)
	err := m.db.QueryRowContext(r.Context(), m.q.lookup, key).Scan(&storedHash, &status, &header, &body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Released between the two statements: the client may retry.
		http.Error(w, "the key was released; retry", http.StatusConflict)
		return
	case err != nil:
		http.Error(w, "lookup: "+err.Error(), http.StatusServiceUnavailable)
		return
	case !bytes.Equal(storedHash, hash):
		http.Error(w, "the key was used for another request", http.StatusUnprocessableEntity)
		return
	case !status.Valid:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the first request with this key is still running", http.StatusConflict)
		return
	}
	h, err := codec.DecodeHeader(header)
	if err != nil {
		http.Error(w, "stored header: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h.Set(idemhttp.ReplayedHeader, "true")
	copyResponse(w, int(status.Int64), h, body)
}

// handle runs next in a transaction of its own and, when its response is
// to be stored, stores it under token and commits.
func (m *leaseMiddleware) handle(ctx context.Context, rec *httptest.ResponseRecorder, r *http.Request, key []byte, token int64, body []byte) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	req := r.WithContext(idemhttp.WithTx(ctx, tx))
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	m.next.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		return nil // not stored; the deferred rollback undoes the effect
	}
	header := codec.EncodeHeader(rec.Header())
	expires := time.Now().Add(leaseKeep).UnixMicro()
	res, err := tx.ExecContext(ctx, m.q.complete, int64(rec.Code), header, rec.Body.Bytes(), expires, key, token)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v: the lease was lost", n, err)
	}
	return tx.Commit()
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
