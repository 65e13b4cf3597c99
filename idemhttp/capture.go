package idemhttp

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"strings"
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
// It behaves as net/http's own writer where a handler can tell: the status
// and header are fixed by the first WriteHeader or Write, a later
// WriteHeader is ignored, 204 and 304 take no body, and a missing
// Content-Type is sniffed from the body. Informational (1xx) responses are
// dropped, since they would reach the client early, and so are trailers.
type capture struct {
	header http.Header // what the handler sees and changes
	sent   http.Header // header as it was at WriteHeader
	status int         // 0 until WriteHeader or Write
	body   bytes.Buffer
}

func newCapture() *capture { return &capture{header: make(http.Header)} }

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
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(c.status) {
		return 0, http.ErrBodyNotAllowed
	}
	return c.body.Write(p)
}

func (c *capture) WriteString(s string) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(c.status) {
		return 0, http.ErrBodyNotAllowed
	}
	return c.body.WriteString(s)
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
	h, body := c.sent, c.body.Bytes()
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
