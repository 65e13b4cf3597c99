package idem_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"math"
	"net/http"
	"reflect"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
	"github.com/idemgo/idem/proving/dbtest"
)

// fuzzMaxResponse is the response limit of FuzzDo's store: small, so that
// the fuzzer reaches ErrResponseTooLarge.
const fuzzMaxResponse = 4096

// FuzzDo claims arbitrary keys with arbitrary hashes and responses on
// SQLite. Invalid input must be refused with its sentinel and store nothing;
// valid input must claim, replay byte for byte, and be a Mismatch under
// another hash. Its seed corpus runs with the normal tests.
func FuzzDo(f *testing.F) {
	f.Add([]byte("k"), []byte{1}, 201, "Content-Type", "application/json", []byte("{\"order\":1}\x00\xff"))
	f.Add([]byte{}, []byte{1}, 200, "", "", []byte{})
	f.Add([]byte("k"), []byte{}, 200, "", "", []byte{})
	f.Add([]byte("k"), make([]byte, idem.MaxHashBytes+1), 200, "", "", []byte(nil))
	f.Add(bytes.Repeat([]byte("k"), idem.MaxStoredKeyBytes), make([]byte, idem.MaxHashBytes), 204, "X", "", []byte(nil))
	f.Add(bytes.Repeat([]byte("k"), idem.MaxStoredKeyBytes+1), []byte{1}, 200, "", "", []byte(nil))
	f.Add([]byte("\x00\xff key "), []byte{0}, -1, "\x00", "\xff", []byte("\x00"))
	f.Add([]byte("k"), []byte{1}, math.MaxInt32+1, "", "", []byte{})
	f.Add([]byte("k"), []byte{1}, math.MinInt32, "", "", []byte{})
	f.Add([]byte("k"), []byte{1}, 200, "", "", bytes.Repeat([]byte("b"), fuzzMaxResponse+1))
	f.Add([]byte("k"), []byte{1}, 200, "X", "v", bytes.Repeat([]byte("b"), fuzzMaxResponse-8))

	e := fuzzEnv(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, key, hash []byte, status int, name, value string, body []byte) {
		fuzzClear(t, e)
		resp := idem.Response{Status: status, Body: body}
		if name != "" || value != "" {
			resp.Header = http.Header{name: {value}}
		}
		k := string(key)
		runs := 0
		fn := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			runs++
			return e.Effect(k, resp)(ctx, tx)
		}

		var want error
		switch {
		case len(key) == 0 || len(key) > idem.MaxStoredKeyBytes:
			want = idem.ErrInvalidKey
		case len(hash) == 0 || len(hash) > idem.MaxHashBytes:
			want = idem.ErrInvalidHash
		case status < math.MinInt32 || status > math.MaxInt32:
			want = idem.ErrInvalidArgument
		case len(codec.EncodeHeader(resp.Header))+len(body) > fuzzMaxResponse:
			want = idem.ErrResponseTooLarge
		}

		tx, err := e.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// An input that fails must not leave SQLite's write lock held
		// for the next one.
		defer func() { _ = tx.Rollback() }()
		res, err := e.Store.Do(ctx, tx, k, hash, fn)
		if want != nil {
			if !errors.Is(err, want) {
				t.Fatalf("Do = %v, %v; want %v", res.Outcome, err, want)
			}
			if (want == idem.ErrInvalidKey || want == idem.ErrInvalidHash) && runs != 0 {
				t.Errorf("fn ran %d times on input Do refused", runs)
			}
			// A careless caller commits anyway: still nothing is stored.
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n := fuzzRecords(t, e); n != 0 {
				t.Fatalf("%d records stored for input Do refused with %v", n, want)
			}
			return
		}
		if err != nil {
			t.Fatalf("Do: %v, want Claimed", err)
		}
		if res.Outcome != idem.Claimed || runs != 1 {
			t.Fatalf("Do = %v with fn run %d times, want Claimed with one run", res.Outcome, runs)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}

		// The stored response comes back as it was given: an empty header
		// as nil, a nil body as empty.
		stored := resp
		if len(stored.Header) == 0 {
			stored.Header = nil
		}
		if stored.Body == nil {
			stored.Body = []byte{}
		}
		res, err = e.Do(t, k, hash, fn, false)
		dbtest.WantOutcome(t, res, err, idem.Replay)
		if res.Response.Status != stored.Status || !reflect.DeepEqual(res.Response.Header, stored.Header) ||
			res.Response.Body == nil || !bytes.Equal(res.Response.Body, stored.Body) {
			t.Fatalf("replay = %d %q %q, want %d %q %q", res.Response.Status, res.Response.Header, res.Response.Body,
				stored.Status, stored.Header, stored.Body)
		}
		if lres, err := e.Store.Lookup(ctx, e.DB, k); err != nil || lres.Outcome != idem.Replay || !reflect.DeepEqual(lres.Response, res.Response) {
			t.Fatalf("Lookup = %v %+v, %v; want the replay %+v", lres.Outcome, lres.Response, err, res.Response)
		}

		other := append([]byte(nil), hash...)
		other[len(other)-1] ^= 1
		for _, h := range [][]byte{other, hash[:len(hash)-1], append(append([]byte(nil), hash...), 0)} {
			if len(h) == 0 || len(h) > idem.MaxHashBytes {
				continue
			}
			res, err = e.Do(t, k, h, fn, false)
			dbtest.WantOutcome(t, res, err, idem.Mismatch)
			if res.Response.Status != 0 || res.Response.Header != nil || res.Response.Body != nil {
				t.Fatalf("a Mismatch carries a response: %+v", res.Response)
			}
		}
		if runs != 1 {
			t.Fatalf("fn ran %d times, want 1", runs)
		}
		if n := e.EffectCount(t, k); n != 1 {
			t.Fatalf("%d effect rows, want 1", n)
		}
		if n := fuzzRecords(t, e); n != 1 {
			t.Fatalf("%d records, want 1", n)
		}
	})
}

// fuzzEnv is setup for a fuzz target: one SQLite database, store and effect
// table for the whole run, which each input clears.
func fuzzEnv(f *testing.F) *env {
	f.Helper()
	// The file is thrown away: no need to wait for the disk.
	tg := dbtest.SQLite("_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)")
	return &env{Env: tg.Setup(f, idem.WithMaxResponseBytes(fuzzMaxResponse)), tg: tg}
}

// fuzzClear deletes every record and effect row of e.
func fuzzClear(t *testing.T, e *env) {
	t.Helper()
	for _, table := range []string{e.Table, e.Effects.Table} {
		if _, err := e.DB.ExecContext(context.Background(), "DELETE FROM "+table); err != nil {
			t.Fatal(err)
		}
	}
}

// fuzzRecords counts the rows of e's store table.
func fuzzRecords(t *testing.T, e *env) int {
	t.Helper()
	var n int
	if err := e.DB.QueryRowContext(context.Background(), "SELECT count(*) FROM "+e.Table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
