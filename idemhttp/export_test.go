package idemhttp

import "net/http"

// BufferCap returns the capacity of the body buffer behind w, the
// ResponseWriter of a protected handler, or -1 when w is not one. It lets
// the tests see how much memory a response holds, rather than guess it from
// the runtime's statistics, which other tests and the collector disturb.
func BufferCap(w http.ResponseWriter) int {
	c, ok := w.(*capture)
	if !ok {
		return -1
	}
	return cap(c.body)
}
