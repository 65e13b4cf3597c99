package idemhttp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/answer"
)

// Steps returns a handler that serves each request as a multi-step request
// of idem.Store.Run, for an endpoint that calls another system (a payment
// provider, a mail service) and so cannot do its work in one transaction.
// build makes the request's steps from the request: Phase and Final steps
// that take the middleware's transactions (*sql.Tx for New, pgx.Tx for
// idempgx.NewMiddleware), and Call steps between them. The Final step's
// response is the one the client gets, stored whatever its status, with
// its headers as the step gives them, and replayed byte for byte; one whose
// status net/http cannot send, outside 100 to 999, is answered with a 500
// record-damaged problem on the first answer and on every retry, and the
// error hook is told [ErrInvalidStatus].
//
// The request is identified as for Handler: its key, scope, hash and body
// limit, with the same refusals. Its outcome is answered as Handler
// answers, with two more cases that only a multi-step request has:
//
//   - a request that another call is running, or whose runner died and
//     whose lease has not yet run out: 409 in-flight, with a Retry-After
//     of at least the lease that is left, after which a retry takes the
//     request over and resumes it;
//   - a step that failed: 503 unfinished, with Retry-After. The steps that
//     committed stay done, and a retry with the same key resumes the
//     request after them. A Call runs again only when the phase after it
//     had not committed, with the same call key, for the other system to
//     answer as a retry.
//
// docs/phases.md in the repository has the table of outcomes.
//
// Each step's context carries the request's idem.Identity, with its scope,
// as the handler's does for Handler: a step keys the rows it writes by
// idem.IdentityFrom, not by the client's raw key, which two clients may
// share.
//
// build runs for each request before anything is claimed, with a request
// whose body reads from the start. It must build the same steps from the
// same request, since a retry resumes with the steps its own call of build
// returns. An error from build stores nothing: one made with idem.Finish
// answers the request with its response, as it is (a 400 for a malformed
// body, say), so that a corrected request may use the same key, or with a
// 500 internal-error when its status is outside 100 to 999; any other
// is a 500 internal-error, and goes to the error hook.
//
// Every request to Steps needs a key, whatever WithKeyRequired says, since
// a multi-step request lives in the record of its key: one without a key
// gets 400 key-required, and one whose method the middleware does not
// protect (WithMethods) gets 405, with the protected methods in Allow. A
// nil build, or a Middleware that New did not return, fails closed, as
// Handler does.
func (m *Middleware) Steps(build func(r *http.Request) ([]idem.Step, error)) http.Handler {
	if err := m.usable(); err != nil {
		return &failing{err: err}
	}
	if build == nil {
		return &failing{cfg: &m.cfg, err: fmt.Errorf("idemhttp: Steps was given a nil function: %w", idem.ErrInvalidArgument)}
	}
	return &stepsHandler{m: m, build: build}
}

type stepsHandler struct {
	m     *Middleware
	build func(*http.Request) ([]idem.Step, error)
}

func (h *stepsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m, cfg := h.m, &h.m.cfg
	id, err := m.identify(r, false)
	if err != nil {
		m.refuse(w, r, err, nil)
		return
	}

	req := r.Clone(r.Context())
	req.Body = io.NopCloser(bytes.NewReader(id.body))
	req.ContentLength = int64(len(id.body))
	steps, err := h.build(req)
	if err != nil {
		if resp, ok := idem.Finished(err); ok {
			cfg.writeResponse(w, r, resp, originUnstored)
			return
		}
		cfg.report(r, fmt.Errorf("idemhttp: build the steps: %w", err))
		cfg.writeProblem(w, r, problemInternal)
		return
	}

	res, err := m.run.Run(id.scoped(r.Context()), id.key, id.hash, steps)
	switch {
	case err != nil:
		cfg.report(r, err)
		cfg.writeProblem(w, r, stepsFailure(err))
	case res.Outcome == idem.Claimed:
		cfg.writeResponse(w, r, res.Response, originStored)
	default:
		cfg.writeUnclaimed(w, r, res)
	}
}

// stepsFailure is the problem that answers an error of Run, as the table
// says (answer.Run): a lease that another call took over as in flight, a
// mistake in the steps as an internal error, since no step ran, a lost
// commit, a stored response that is too large or damaged as Handler
// answers them, and anything else, a step's own error or a conflict that
// outlasted the retries, as a request that a retry resumes.
func stepsFailure(err error) kind { return problemOf(answer.Run.Of(err)) }
