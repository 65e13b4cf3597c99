package idemhttp

import (
	"net/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
)

// ReplayedHeader marks a replayed response: "Idempotent-Replayed: true", as
// Stripe's API sends it. A response without it ran the handler.
const ReplayedHeader = "Idempotent-Replayed"

// storedHeader returns the part of h that is stored with a response: the
// allow-listed headers, and nothing else, so that what must never be
// replayed is never written to the database either.
func (c *config) storedHeader(h http.Header) http.Header {
	var kept http.Header
	for name, values := range h {
		name = http.CanonicalHeaderKey(name)
		if !c.replay[name] {
			continue
		}
		if kept == nil {
			kept = make(http.Header)
		}
		kept[name] = append(kept[name], values...)
	}
	return kept
}

// storedSize is the size the Store counts for a response's header h: its
// allow-listed part, encoded as the Store encodes it.
func (c *config) storedSize(h http.Header) int {
	return codec.HeaderSize(c.storedHeader(h))
}

// writeResponse sends a response to the client: header on top of what outer
// handlers have set in w, then status and body. An error writing to the
// client is not the middleware's to report: the effect is settled either
// way, and the client's retry will replay it.
func writeResponse(w http.ResponseWriter, status int, header http.Header, body []byte) {
	dst := w.Header()
	for name, values := range header {
		dst[name] = values
	}
	w.WriteHeader(status)
	if len(body) > 0 {
		_, _ = w.Write(body)
	}
}

// writeReplay sends a stored response, marked as a replay.
func writeReplay(w http.ResponseWriter, resp idem.Response) {
	h := w.Header()
	for name, values := range resp.Header {
		h[name] = values
	}
	h.Set(ReplayedHeader, "true")
	writeResponse(w, resp.Status, nil, resp.Body)
}
