// Package capture holds the ResponseWriter that idemhttp's protected
// handlers write to, in a package of its own so that the proving ground's
// tests can see how much memory it holds (BufferCap) without the API
// offering it.
package capture

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

// Writer is the ResponseWriter a protected handler writes to. It keeps the
// whole response in memory, because nothing may reach the client before the
// middleware knows whether the response is stored and its transaction
// committed: a client that saw a response whose effect was then rolled back
// would be misled. A new Writer serves each attempt, so that a retried
// transaction leaves nothing of the attempt before.
//
// It keeps no more than limit bytes, counted as the Store counts a response
// it stores: the allow-listed headers, encoded, and the body. The headers
// counted are those that will be stored, the Content-Type that the capture
// sniffs from the body among them, so that a response that fits here is
// never refused by the Store. A Write that would go past the limit keeps
// nothing, fails with an error that matches idem.ErrResponseTooLarge, and
// so does every Write after it, so that a handler that streams stops early
// instead of filling memory. The limit holds for every status, stored or
// not: a 5xx is held in memory like any other response until the handler
// returns.
//
// It behaves as net/http's own writer where a handler can tell: the status
// and header are fixed by the first WriteHeader or Write, a later
// WriteHeader is ignored, 204 and 304 take no body, and a missing
// Content-Type is sniffed from the body. Informational (1xx) responses are
// dropped, since they would reach the client early, and so are trailers. A
// status that net/http would panic on, outside 100 to 999, is kept as the
// handler gave it: the middleware never stores it, and idemhttp's
// writeResponse answers it.
type Writer struct {
	header http.Header // what the handler sees and changes
	// sent is the header as it was at WriteHeader, with the Content-Type
	// sniffed from the body when it had none: the header of the response.
	sent   http.Header
	status int  // as WriteHeader or Write fixed it
	fixed  bool // whether WriteHeader or Write fixed the status and header
	// sniffs is whether the Content-Type is sniffed from the body: sent
	// has none, and no Content-Encoding, as net/http decides it.
	sniffs bool
	body   []byte // its capacity never exceeds room

	limit int // bytes of encoded allow-listed header and body
	// headerSize is what the Store counts for a header: the size of its
	// allow-listed part, encoded.
	headerSize func(http.Header) int
	room       int   // bytes the body may take beside sent
	err        error // set when the response went past limit
}

// New returns a Writer that keeps no more than limit bytes, counting a
// header as headerSize does.
func New(limit int, headerSize func(http.Header) int) *Writer {
	return &Writer{header: make(http.Header), limit: limit, headerSize: headerSize}
}

func (c *Writer) Header() http.Header { return c.header }

func (c *Writer) WriteHeader(code int) {
	if c.fixed || code >= 100 && code <= 199 {
		return
	}
	c.status, c.fixed = code, true
	c.sent = c.header.Clone()
	_, typed := c.sent["Content-Type"]
	c.sniffs = !typed && c.sent.Get("Content-Encoding") == ""
	c.room = c.limit - c.headerSize(c.sent)
	if c.room < 0 {
		c.fail()
	}
}

func (c *Writer) Write(p []byte) (int, error) { return write(c, p) }

func (c *Writer) WriteString(s string) (int, error) { return write(c, s) }

// write is Write and WriteString, which differ in the type of p alone: it
// appends p to the body if the response with it fits the limit.
func write[B []byte | string](c *Writer, p B) (int, error) {
	if !c.fixed {
		c.WriteHeader(http.StatusOK)
	}
	if err := c.reserve(len(p), sniff(c, p)); err != nil {
		return 0, err
	}
	c.body = append(c.body, p...)
	return len(p), nil
}

// sniffLen is how many bytes of a body http.DetectContentType reads.
const sniffLen = 512

// sniff returns the Content-Type that the body will have with p appended,
// as net/http sniffs it, when the capture sniffs one and p may change it:
// while the body is shorter than the bytes that decide it. It returns ""
// otherwise, and for a body that is still empty, which gets no type.
func sniff[B []byte | string](c *Writer, p B) string {
	if !c.sniffs || len(c.body) >= sniffLen || len(c.body)+len(p) == 0 {
		return ""
	}
	var head [sniffLen]byte
	n := copy(head[:], c.body)
	n += copy(head[n:], p)
	return http.DetectContentType(head[:n])
}

// reserve makes room in the body for n more bytes, or reports why they may
// not be written. contentType, unless empty, is the body's sniffed type
// with those bytes, which the header will carry, and which is counted
// before they are. It grows the body as append would, by doubling, but
// never past room, so that a response just under the limit does not hold
// twice the limit in spare capacity.
func (c *Writer) reserve(n int, contentType string) error {
	switch {
	case !bodyAllowed(c.status):
		return http.ErrBodyNotAllowed
	case c.err != nil:
		return c.err
	}
	if contentType != "" {
		c.sent["Content-Type"] = []string{contentType}
		c.room = c.limit - c.headerSize(c.sent)
	}
	if n > c.room-len(c.body) {
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
func (c *Writer) fail() error {
	c.err = fmt.Errorf("idemhttp: the response is over the limit of %d bytes of body and allow-listed headers: %w", c.limit, idem.ErrResponseTooLarge)
	c.body = nil
	return c.err
}

// Flush does nothing: the response leaves when the handler has returned and
// the transaction is settled. Streaming responses do not fit a protected
// endpoint.
func (c *Writer) Flush() {}

// FlushError is Flush for http.ResponseController.
func (c *Writer) FlushError() error { return nil }

// Err is the error that a Write past the limit failed with, nil while the
// response fits.
func (c *Writer) Err() error { return c.err }

// BufferCap is the capacity of the body's buffer, which never exceeds the
// room that the limit leaves beside the header.
func (c *Writer) BufferCap() int { return cap(c.body) }

// Hijack is refused; see errHijack.
func (c *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, errHijack }

// Response returns the finished response: its status (200 if the handler
// wrote nothing), its header, with the sniffed Content-Type, and its body.
func (c *Writer) Response() idem.Response {
	if !c.fixed {
		c.WriteHeader(http.StatusOK)
	}
	for name := range c.sent {
		if name == "Trailer" || strings.HasPrefix(name, http.TrailerPrefix) {
			delete(c.sent, name) // the response leaves whole, with no trailers
		}
	}
	return idem.Response{Status: c.status, Header: c.sent, Body: c.body}
}

// bodyAllowed reports whether a response with status may have a body, as
// net/http decides it.
func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}
