package idemhttp_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestCaptureBehavesLikeNetHTTP checks that a handler behind the middleware
// is answered as net/http would answer it, first time and on replay. A
// status net/http would panic on is TestInvalidStatus's.
func TestCaptureBehavesLikeNetHTTP(t *testing.T) {
	e := setup(t, dbtest.SQLite(sqliteParams))
	writeErr := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/sniffed", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><body>hi</body></html>")
	})
	mux.HandleFunc("/first-status-wins", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/a")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("Location", "/b") // too late, as in net/http
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "x")
	})
	mux.HandleFunc("/informational", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "x")
	})
	mux.HandleFunc("/no-content", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		_, err := io.WriteString(w, "x")
		writeErr <- err
	})
	mux.HandleFunc("/trailers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "x")
		w.Header().Set("X-Sum", "1")
		w.Header().Set(http.TrailerPrefix+"X-Late", "2")
	})
	srv := e.serve(t, mux)

	for _, c := range []struct {
		path, key   string
		status      int
		contentType string
		location    string
		body        string
		replays     bool
	}{
		{"/sniffed", "k1", 200, "text/html; charset=utf-8", "", "<html><body>hi</body></html>", true},
		{"/first-status-wins", "k2", 201, "text/plain; charset=utf-8", "/a", "x", true},
		{"/informational", "k3", 201, "text/plain; charset=utf-8", "", "x", true},
		{"/no-content", "k4", 204, "", "", "", true},
	} {
		t.Run(c.path, func(t *testing.T) {
			for i := 0; i < 2; i++ {
				rep := send(t, srv, "POST", c.path, c.key, "")
				replayed := rep.header.Get(idemhttp.ReplayedHeader) == "true"
				if rep.status != c.status || rep.header.Get("Content-Type") != c.contentType ||
					rep.header.Get("Location") != c.location || string(rep.body) != c.body || replayed != (i == 1 && c.replays) {
					t.Errorf("request %d: %d %q, Content-Type %q, Location %q, replayed %v; want %d %q, %q, %q, replayed %v",
						i+1, rep.status, rep.body, rep.header.Get("Content-Type"), rep.header.Get("Location"), replayed,
						c.status, c.body, c.contentType, c.location, i == 1 && c.replays)
				}
			}
			if c.path == "/no-content" {
				// The first request ran the handler; the replay did not.
				if err := <-writeErr; !errors.Is(err, http.ErrBodyNotAllowed) {
					t.Errorf("Write after 204 = %v, want http.ErrBodyNotAllowed", err)
				}
			}
		})
	}

	t.Run("/trailers", func(t *testing.T) {
		req, _ := http.NewRequest("POST", srv.URL+"/trailers", strings.NewReader(""))
		req.Header.Set("Idempotency-Key", "k6")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "x" || len(resp.Trailer) != 0 || resp.Header.Get("Trailer") != "" {
			t.Errorf("got %q, trailers %v, Trailer header %q; want the body and no trailers", body, resp.Trailer, resp.Header.Get("Trailer"))
		}
	})
}
