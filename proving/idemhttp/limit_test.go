package idemhttp_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/internal/capture"
	"github.com/idemgo/idem/internal/codec"
)

// streamRun is what one run of the streaming handler saw.
type streamRun struct {
	written  int   // bytes that Write accepted
	maxCap   int   // the largest capacity of the capture's buffer
	err      error // the error that stopped the stream, if any
	errAgain error // what a Write after that error answered
	capAfter int   // the buffer's capacity after the error
}

// streamer is a handler that writes its effect and then streams size bytes
// in chunks of chunk bytes with status, stopping at the first failed
// Write, as a well-behaved streaming handler does.
type streamer struct {
	e      *env
	status atomic.Int64
	size   atomic.Int64
	chunk  int

	mu   sync.Mutex
	last streamRun
}

func (s *streamer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.e.insert(r.Context(), idemhttp.Tx(r.Context()), "streamed"); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(int(s.status.Load()))
	var run streamRun
	chunk := make([]byte, s.chunk)
	for size := int(s.size.Load()); run.written < size; {
		n, err := w.Write(chunk[:min(len(chunk), size-run.written)])
		run.written += n
		run.maxCap = max(run.maxCap, bufferCap(w))
		if err != nil {
			run.err = err
			_, run.errAgain = w.Write(chunk[:1])
			run.capAfter = bufferCap(w)
			break
		}
	}
	s.mu.Lock()
	s.last = run
	s.mu.Unlock()
}

func (s *streamer) lastRun() streamRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// TestStreamingResponseStopsAtTheLimit streams 64 MiB in 32 KiB writes,
// with a stored status and with a 5xx that is not stored, behind a 1 MiB
// limit. The handler's Write must fail at the limit, so that the handler
// stops having written at most the limit; the capture's buffer must never
// grow past it; the client gets the 500 response-too-large problem; and
// nothing is committed: no effect, no record, and the same key then runs a
// request whose response fits. The assertions count bytes, not time or the
// runtime's memory statistics, so that a loaded machine cannot make them
// flake.
func TestStreamingResponseStopsAtTheLimit(t *testing.T) {
	const (
		limit  = 1 << 20
		stream = 64 << 20
		chunk  = 32 << 10
	)
	// The body may take what the stored header leaves of the limit, and a
	// Write that does not fit whole is refused whole.
	room := limit - len(codec.EncodeHeader(http.Header{"Content-Type": {"application/octet-stream"}}))
	forEach(t, func(t *testing.T, tg target) {
		for _, status := range []int{http.StatusOK, http.StatusBadGateway} {
			t.Run(http.StatusText(status), func(t *testing.T) {
				e := setup(t, tg, idem.WithMaxResponseBytes(limit))
				var h hook
				s := &streamer{e: e, chunk: chunk}
				s.status.Store(int64(status))
				s.size.Store(stream)
				srv := e.serve(t, s, h.option())

				rep := send(t, srv, "POST", "/export", "k", "")
				if rep.status != http.StatusInternalServerError || len(rep.body) > 4096 {
					t.Fatalf("the client got %d with %d bytes, want the 500 response-too-large problem", rep.status, len(rep.body))
				}
				wantProblem(t, rep, http.StatusInternalServerError, "response-too-large", "")
				run := s.lastRun()
				if !errors.Is(run.err, idem.ErrResponseTooLarge) {
					t.Fatalf("the handler's Write failed with %v after %d bytes, want ErrResponseTooLarge", run.err, run.written)
				}
				if want := room / chunk * chunk; run.written != want {
					t.Errorf("the handler wrote %d bytes before Write failed, want %d: the whole chunks that fit in %d", run.written, want, room)
				}
				if run.maxCap > room {
					t.Errorf("the capture's buffer grew to %d bytes, past the %d the body may take", run.maxCap, room)
				}
				if !errors.Is(run.errAgain, idem.ErrResponseTooLarge) || run.capAfter != 0 {
					t.Errorf("after the failure, Write = %v and the buffer holds %d bytes; want the same error and the body let go", run.errAgain, run.capAfter)
				}
				e.wantTooLargeUndone(t, &h, "k")

				// The key is free: a response that fits runs and is stored.
				s.status.Store(http.StatusOK)
				s.size.Store(chunk)
				rep = send(t, srv, "POST", "/export", "k", "")
				if rep.status != http.StatusOK || len(rep.body) != chunk {
					t.Fatalf("after the refusal, the key answered %d with %d bytes; want the handler's 200 with %d", rep.status, len(rep.body), chunk)
				}
				if n := e.Effects.Total(t); n != 1 {
					t.Errorf("%d effect rows, want 1", n)
				}
				if res, err := e.lookup(t, "", "k"); err != nil || res.Outcome != idem.Replay {
					t.Errorf("Lookup = %v, %v; want the stored response", res.Outcome, err)
				}
			})
		}
	})
}

// TestResponseLimitCountsAsTheStore checks that the middleware counts a
// response as the Store does, the allow-listed headers encoded plus the
// body, with the Store's own limit: a response of exactly the limit is
// stored, and one byte more fails the handler's Write, at the very size at
// which the Store would refuse it.
func TestResponseLimitCountsAsTheStore(t *testing.T) {
	const limit = 300
	header := http.Header{"Content-Type": {"text/plain"}}
	room := limit - len(codec.EncodeHeader(header)) // what the body may take
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg, idem.WithMaxResponseBytes(limit))
		var writeErr atomic.Value
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Not-Stored", strings.Repeat("x", limit)) // not on the allow-list: not counted
			size := len(r.URL.Query().Get("size"))
			if _, err := io.WriteString(w, strings.Repeat("b", size)); err != nil {
				writeErr.Store(err)
			}
		})
		size := func(n int) string { return "/?size=" + strings.Repeat("n", n) }

		t.Run("at the limit", func(t *testing.T) {
			srv := e.serve(t, handler)
			first := send(t, srv, "POST", size(room), "fits", "")
			if first.status != http.StatusOK || len(first.body) != room {
				t.Fatalf("got %d with %d bytes, want 200 with %d", first.status, len(first.body), room)
			}
			if rep := send(t, srv, "POST", size(room), "fits", ""); rep.header.Get(idemhttp.ReplayedHeader) != "true" || len(rep.body) != room {
				t.Errorf("the retry got %d bytes, replayed %q; want the stored response", len(rep.body), rep.header.Get(idemhttp.ReplayedHeader))
			}
		})
		t.Run("one byte over, refused by the middleware", func(t *testing.T) {
			var h hook
			srv := e.serve(t, handler, h.option())
			wantProblem(t, send(t, srv, "POST", size(room+1), "over", ""), http.StatusInternalServerError, "response-too-large", "")
			if err, _ := writeErr.Load().(error); !errors.Is(err, idem.ErrResponseTooLarge) {
				t.Errorf("the handler's Write returned %v, want ErrResponseTooLarge", err)
			}
			if errs := h.reported(); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "idemhttp: ") {
				t.Errorf("ErrorHook got %v, want the middleware's own refusal", errs)
			}
			e.wantNoRecord(t, "", "over")
		})
	})
}

// TestResponseLimitCountsTheSniffedType checks that the middleware counts
// the Content-Type it sniffs for a handler that sets none, as the Store
// counts it once stored: a handler that writes exactly the limit of body,
// byte by byte, gets the error on the Write that passes the limit with that
// header, not a 500 from the Store after every Write succeeded; and a body
// that fits with it is stored and replayed byte for byte, with the sniffed
// type. It runs with text and with binary bytes, whose sniffed types differ
// in length.
func TestResponseLimitCountsTheSniffedType(t *testing.T) {
	const limit = 300
	forEach(t, func(t *testing.T, tg target) {
		for _, c := range []struct {
			name string
			b    byte
		}{{"text", 'b'}, {"binary", 0}} {
			t.Run(c.name, func(t *testing.T) {
				sniffed := http.DetectContentType([]byte{c.b})
				room := limit - len(codec.EncodeHeader(http.Header{"Content-Type": {sniffed}}))
				e := setup(t, tg, idem.WithMaxResponseBytes(limit))
				var written atomic.Int64
				var writeErr atomic.Value
				handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					size := len(r.URL.Query().Get("size"))
					for i := 0; i < size; i++ {
						if _, err := w.Write([]byte{c.b}); err != nil {
							writeErr.Store(err)
							break
						}
						written.Add(1)
					}
				})
				size := func(n int) string { return "/?size=" + strings.Repeat("n", n) }

				t.Run("the limit of body", func(t *testing.T) {
					var h hook
					srv := e.serve(t, handler, h.option())
					wantProblem(t, send(t, srv, "POST", size(limit), "over", ""), http.StatusInternalServerError, "response-too-large", "")
					if err, _ := writeErr.Load().(error); !errors.Is(err, idem.ErrResponseTooLarge) || written.Load() != int64(room) {
						t.Errorf("%d Writes succeeded, then %v; want %d, then ErrResponseTooLarge: the body and its sniffed %q fill the limit",
							written.Load(), err, room, sniffed)
					}
					if errs := h.reported(); len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "idemhttp: ") {
						t.Errorf("ErrorHook got %v, want the middleware's own refusal", errs)
					}
					e.wantNoRecord(t, "", "over")
				})
				t.Run("a body that fits", func(t *testing.T) {
					srv := e.serve(t, handler)
					first := send(t, srv, "POST", size(room), "fits", "")
					if first.status != http.StatusOK || len(first.body) != room || first.header.Get("Content-Type") != sniffed {
						t.Fatalf("got %d with %d bytes of %q, want 200 with %d of %q", first.status, len(first.body), first.header.Get("Content-Type"), room, sniffed)
					}
					again := send(t, srv, "POST", size(room), "fits", "")
					if again.status != first.status || !bytes.Equal(again.body, first.body) ||
						again.header.Get("Content-Type") != sniffed || again.header.Get(idemhttp.ReplayedHeader) != "true" {
						t.Errorf("the retry got %d with %d bytes of %q, replayed %q; want the stored response byte for byte",
							again.status, len(again.body), again.header.Get("Content-Type"), again.header.Get(idemhttp.ReplayedHeader))
					}
				})
			})
		}
	})
}

// bufferCap is the capacity of the buffer of the capture that w is, -1 if
// w is none.
func bufferCap(w http.ResponseWriter) int {
	c, ok := w.(*capture.Writer)
	if !ok {
		return -1
	}
	return c.BufferCap()
}
