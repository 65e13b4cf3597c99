package idemhttp

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/idemgo/idem"
)

// errHijack is what Hijack answers: a hijacked connection would let bytes
// reach the client before the transaction commits, and its response could
// not be stored.
var errHijack = errors.New("idemhttp: a protected request cannot hijack its connection")

// capture is the ResponseWriter a protected handler writes to. It keeps the
// whole response in memory, because nothing may reach the client before the
// middleware knows whether the response is stored and its transaction
// committed: a client that saw a response whose effect was then rolled back
// would be misled. A new capture serves each attempt, so that a retried
// transaction leaves nothing of the attempt before.
//
// It keeps no more than limit bytes, counted as the Store counts a response
// it stores: the allow-listed headers, encoded, and the body. A Write that
// would go past the limit keeps nothing, fails with an error that matches
// idem.ErrResponseTooLarge, and so does every Write after it, so that a
// handler that streams stops early instead of filling memory. The limit
// holds for every status, stored or not: a 5xx is held in memory like any
// other response until the handler returns.
//
// It behaves as net/http's own writer where a handler can tell: the status
// and header are fixed by the first WriteHeader or Write, a later
// WriteHeader is ignored, 204 and 304 take no body, and a missing
// Content-Type is sniffed from the body. Informational (1xx) responses are
// dropped, since they would reach the client early, and so are trailers.
type capture struct {
	header http.Header // what the handler sees and changes
	sent   http.Header // header as it was at WriteHeader
	status int         // 0 until WriteHeader or Write
	body   []byte      // its capacity never exceeds room

	limit int // bytes of encoded allow-listed header and body
	// headerSize is what the Store counts for a header: the size of its
	// allow-listed part, encoded.
	headerSize func(http.Header) int
	room       int   // bytes the body may take, once the header is fixed
	err        error // set when the response went past limit
}

func newCapture(limit int, headerSize func(http.Header) int) *capture {
	return &capture{header: make(http.Header), limit: limit, headerSize: headerSize}
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	switch {
	case c.status != 0, code >= 100 && code <= 199:
		return
	case code < 100 || code > 999:
		// net/http panics on such a code; here it counts as the server
		// error it is, and is therefore not stored.
		code = http.StatusInternalServerError
	}
	c.status = code
	c.sent = c.header.Clone()
	c.room = c.limit - c.headerSize(c.sent)
	if c.room < 0 {
		c.fail()
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if err := c.reserve(len(p)); err != nil {
		return 0, err
	}
	c.body = append(c.body, p...)
	return len(p), nil
}

func (c *capture) WriteString(s string) (int, error) {
	if err := c.reserve(len(s)); err != nil {
		return 0, err
	}
	c.body = append(c.body, s...)
	return len(s), nil
}

// reserve makes room in the body for n more bytes, or reports why they may
// not be written. It grows the body as append would, by doubling, but never
// past room, so that a response just under the limit does not hold twice
// the limit in spare capacity.
func (c *capture) reserve(n int) error {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	switch {
	case !bodyAllowed(c.status):
		return http.ErrBodyNotAllowed
	case c.err != nil:
		return c.err
	case n > c.room-len(c.body):
		return c.fail()
	}
	if need := len(c.body) + n; need > cap(c.body) {
		grown := make([]byte, len(c.body), min(max(2*cap(c.body), need, 512), c.room))
		copy(grown, c.body)
		c.body = grown
	}
	return nil
}

// fail marks the response as too large and lets its body go at once: it
// will never be sent, and a handler that ignores the error and goes on
// writing must not keep it alive.
func (c *capture) fail() error {
	c.err = fmt.Errorf("idemhttp: the response is over the limit of %d bytes of body and allow-listed headers: %w", c.limit, idem.ErrResponseTooLarge)
	c.body = nil
	return c.err
}

// Flush does nothing: the response leaves when the handler has returned and
// the transaction is settled. Streaming responses do not fit a protected
// endpoint.
func (c *capture) Flush() {}

// FlushError is Flush for http.ResponseController.
func (c *capture) FlushError() error { return nil }

// Hijack is refused; see errHijack.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, errHijack }

// response returns the finished response: its status (200 if the handler
// wrote nothing), its header and its body.
func (c *capture) response() (int, http.Header, []byte) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	h, body := c.sent, c.body
	for name := range h {
		if name == "Trailer" || strings.HasPrefix(name, http.TrailerPrefix) {
			delete(h, name) // the response leaves whole, with no trailers
		}
	}
	if _, typed := h["Content-Type"]; !typed && len(body) > 0 && h.Get("Content-Encoding") == "" {
		h.Set("Content-Type", http.DetectContentType(body))
	}
	return c.status, h, body
}

// bodyAllowed reports whether a response with status may have a body, as
// net/http decides it.
func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}
