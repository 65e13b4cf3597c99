package ginrouter

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

// ginContextKey carries the *gin.Context through the net/http middleware,
// so that the handler built once in Wrap finds the request's own.
type ginContextKey struct{}

// Wrap protects the gin handler h with mw, a net/http middleware such as
// the Handler method of an idemhttp.Middleware, and returns a gin handler
// to register as the route's last. gin has no adapter of its own for such
// middleware.
//
// On every attempt, h runs with c.Request set to the middleware's request,
// whose context carries the transaction (idemhttp.Tx(c.Request.Context()))
// and whose body reads from the start, and with c.Writer set to a gin
// ResponseWriter over the middleware's writer, which holds the response
// back until the commit. Both are put back when h returns. When the
// middleware answers on its own (a replay, a 409, a 422), h does not run
// and Wrap writes nothing: the middleware's answer is the response.
//
// Wrap takes the handler itself, rather than being a gin middleware that
// calls c.Next, because the middleware may run its handler more than once
// for one request: DoTx runs the transaction again after a conflict. c.Next
// runs the rest of gin's chain once per request and does nothing when
// called again, so a second attempt would store an empty 200 without
// placing the order. Put gin middleware that must run inside the
// transaction in h; middleware in front of Wrap (authentication, logging,
// recovery) sees the final response as usual.
func Wrap(mw func(http.Handler) http.Handler, h gin.HandlerFunc) gin.HandlerFunc {
	protected := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(ginContextKey{}).(*gin.Context)
		writer, request := c.Writer, c.Request
		defer func() { c.Writer, c.Request = writer, request }()
		gw := &responseWriter{ResponseWriter: w, status: http.StatusOK, size: -1}
		c.Writer, c.Request = gw, r
		h(c)
		// gin sends a status set with c.Status only when the chain ends;
		// this chain ends when the middleware reads the response.
		gw.WriteHeaderNow()
	}))
	return func(c *gin.Context) {
		r := c.Request.WithContext(context.WithValue(c.Request.Context(), ginContextKey{}, c))
		protected.ServeHTTP(c.Writer, r)
		c.Abort() // the response is written; no later handler may add to it
	}
}

// responseWriter is gin's ResponseWriter over the middleware's writer. gin
// keeps its own unexported, so this is the small part of it that handlers
// use: the status is kept until the first write, as gin does, so that
// c.Status followed by c.JSON sends one status.
type responseWriter struct {
	http.ResponseWriter
	status int
	size   int // -1 until the header is written
}

var _ gin.ResponseWriter = (*responseWriter)(nil)

func (w *responseWriter) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status = code
	}
}

func (w *responseWriter) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.ResponseWriter.WriteHeader(w.status)
	}
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

func (w *responseWriter) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	n, err := io.WriteString(w.ResponseWriter, s)
	w.size += n
	return n, err
}

func (w *responseWriter) Status() int   { return w.status }
func (w *responseWriter) Size() int     { return w.size }
func (w *responseWriter) Written() bool { return w.size != -1 }

// Flush, Hijack and Pusher go to the middleware's writer, which refuses
// them in its own way: nothing may reach the client before the commit.
func (w *responseWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *responseWriter) Pusher() http.Pusher {
	p, _ := w.ResponseWriter.(http.Pusher)
	return p
}

// CloseNotify is there because gin's interface asks for it. Its channel
// never fires; c.Request.Context() is done when the client goes away.
func (w *responseWriter) CloseNotify() <-chan bool { return make(chan bool) }

// Unwrap lets http.ResponseController reach the middleware's writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
