package idemhttp_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"testing"

	"github.com/idemgo/idem/idemhttp"
)

// gzipOrders answers with a gzip-encoded JSON body and the headers that
// describe it, and with nothing else of its own: every header of its
// response defines the representation.
func gzipOrders(e *env, t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := e.insert(r.Context(), idemhttp.Tx(r.Context()), "gzip"); err != nil {
			t.Error(err)
		}
		plain := []byte(`{"order":1,"items":["book","lamp"]}` + "\n")
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		zw.Write(plain)
		zw.Close()
		digest := func(b []byte) string {
			sum := sha256.Sum256(b)
			return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Encoding", "gzip")
		h.Set("Vary", "Accept-Encoding")
		h.Set("Content-Digest", digest(zipped.Bytes())) // of the bytes sent
		h.Set("Repr-Digest", digest(plain))             // of the decoded representation
		h.Set("Etag", `"order-1-gz"`)
		h.Set("Location", "/orders/1")
		w.WriteHeader(http.StatusCreated)
		w.Write(zipped.Bytes())
	})
}

// TestReplayKeepsTheRepresentation compares a gzip response with its
// replay: the same status, the same bytes, and the same headers, but for the
// replay marker and Date, which belongs to each transmission. Without
// Content-Encoding, the replay would be gzip bytes labelled as JSON.
func TestReplayKeepsTheRepresentation(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		srv := e.serve(t, gzipOrders(e, t))
		// Accept-Encoding set by hand keeps net/http's client from
		// decoding the body and dropping Content-Encoding.
		h := keyHeader("gz")
		h.Set("Accept-Encoding", "gzip")
		first := sendHeader(t, srv, "POST", "/orders", h, nil)
		replay := sendHeader(t, srv, "POST", "/orders", h, nil)

		if replay.status != first.status || !bytes.Equal(replay.body, first.body) {
			t.Fatalf("replay = %d %q, want %d %q", replay.status, replay.body, first.status, first.body)
		}
		if first.header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("the first response has Content-Encoding %q, want gzip", first.header.Get("Content-Encoding"))
		}
		wantSameHeaders(t, replay.header, first.header)
		zr, err := gzip.NewReader(bytes.NewReader(replay.body))
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := io.ReadAll(zr); err != nil || !bytes.HasPrefix(plain, []byte(`{"order":1`)) {
			t.Errorf("the replayed body decodes to %q, %v", plain, err)
		}

		// Accept-Encoding is not in the request hash, so a retry that no
		// longer accepts gzip is the same request: it gets the original
		// response, gzip and all, with the Vary that says the body
		// depends on Accept-Encoding, not a transcoded copy.
		t.Run("a retry that does not accept the stored encoding", func(t *testing.T) {
			h := keyHeader("gz")
			h.Set("Accept-Encoding", "identity")
			again := sendHeader(t, srv, "POST", "/orders", h, nil)
			if again.status != first.status || !bytes.Equal(again.body, first.body) {
				t.Fatalf("replay = %d %q, want the stored bytes", again.status, again.body)
			}
			wantSameHeaders(t, again.header, first.header)
		})
	})
}

// wantSameHeaders fails the test unless replay has exactly first's headers
// with first's values, but for the replay marker, which it must have, and
// Date.
func wantSameHeaders(t *testing.T, replay, first http.Header) {
	t.Helper()
	if replay.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("%s = %q, want true", idemhttp.ReplayedHeader, replay.Get(idemhttp.ReplayedHeader))
	}
	for name, values := range first {
		if name != "Date" && !equal(replay.Values(name), values) {
			t.Errorf("replayed %s = %q, want %q", name, replay.Values(name), values)
		}
	}
	for name, values := range replay {
		if _, ok := first[name]; !ok && name != idemhttp.ReplayedHeader {
			t.Errorf("the replay has %s = %q, which the first response had not", name, values)
		}
	}
}

// TestDefaultReplayHeadersAreReplayed sets every header of the default list
// on a response, and finds each in its replay, as it was.
func TestDefaultReplayHeadersAreReplayed(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		names := idemhttp.DefaultReplayHeaders()
		srv := e.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := e.insert(r.Context(), idemhttp.Tx(r.Context()), "all"); err != nil {
				t.Error(err)
			}
			for _, name := range names {
				w.Header().Set(name, "v-"+name)
			}
			w.Header().Set("Content-Type", "text/plain") // sniffing must not be what sets it
			w.Header().Set("Age", "7")
			w.Header().Set("Accept-Ranges", "bytes")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "made")
		}))
		first := send(t, srv, "POST", "/orders", "all", "")
		replay := send(t, srv, "POST", "/orders", "all", "")
		wantHeaders(t, replay.header, first.header, append(names, idemhttp.ReplayedHeader))
		for _, name := range []string{"Age", "Accept-Ranges"} {
			if first.header.Get(name) == "" || replay.header.Get(name) != "" {
				t.Errorf("%s: first %q, replay %q; want it on the first response only", name, first.header.Get(name), replay.header.Get(name))
			}
		}
	})
}
