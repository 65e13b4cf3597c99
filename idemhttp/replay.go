package idemhttp

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/codec"
)

// ReplayedHeader marks a replayed response: "Idempotent-Replayed: true", as
// Stripe's API sends it. A response without it ran the handler.
const ReplayedHeader = "Idempotent-Replayed"

// ErrInvalidStatus is what the error hook is told, wrapped with the status,
// when Handler or Steps has a response to send whose status is outside 100
// to 999, which net/http cannot send: a handler's WriteHeader(0), a
// response of build's idem.Finish or of a multi-step request's steps, or a
// record that Run, DoTx or an earlier version stored with it. The client
// gets a 500 problem in its place, never a panic.
var ErrInvalidStatus = errors.New("idemhttp: the response's status is not one HTTP can send (100 to 999)")

// validStatus reports whether net/http can send status: its WriteHeader
// panics on a code outside 100 to 999.
func validStatus(status int) bool { return status >= 100 && status <= 999 }

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

// origin is where a response that writeResponse sends comes from.
type origin int

const (
	// originUnstored is a response that nothing stored: a handler's whose status
	// the policy does not keep, or build's idem.Finish.
	originUnstored origin = iota
	// originStored is a response that this call stored, with the request's
	// effect.
	originStored
	// originReplay is a response that an earlier call stored.
	originReplay
)

// writeResponse sends resp, every answer of Handler and Steps that is not
// one of the middleware's own problems: resp.Header on top of what outer
// handlers have set in w, then the status and the body, marked as a replay
// when it is one.
//
// A status that net/http cannot send (see validStatus) is a mistake of the
// server's code, or of an earlier version's, and a panic here would repeat
// on every retry of a request whose effect may have committed. The client
// gets a 500 instead, and the error hook is told ErrInvalidStatus: an
// unstored response is internal-error, as a retry runs the request again;
// a stored one is record-damaged, as the record says the request ran and
// every retry gets the same answer.
//
// An error writing to the client is not the middleware's to report: the
// effect is settled either way, and the client's retry will replay it.
func (c *config) writeResponse(w http.ResponseWriter, r *http.Request, resp idem.Response, from origin) {
	if !validStatus(resp.Status) {
		c.report(r, fmt.Errorf("idemhttp: status %d: %w", resp.Status, ErrInvalidStatus))
		if from == originUnstored {
			c.writeProblem(w, r, problemInternal)
		} else {
			c.writeProblem(w, r, problemRecordDamaged)
		}
		return
	}
	dst := w.Header()
	for name, values := range resp.Header {
		dst[name] = values
	}
	if from == originReplay {
		dst.Set(ReplayedHeader, "true")
	}
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = w.Write(resp.Body)
	}
}
