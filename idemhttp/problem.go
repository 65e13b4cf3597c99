package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgo/idem/internal/answer"
)

// DefaultProblemTypeBase is where the middleware's problem types are
// explained unless WithProblemTypeBase says otherwise: each type is this
// document with a fragment, one per kind of refusal, so that a client can
// tell them apart and a developer can read what to do.
const DefaultProblemTypeBase = "https://github.com/idemgo/idem/blob/main/docs/http.md#"

// Problem is one of the middleware's own refusals or failures, as RFC 9457
// describes a problem: the middleware answers with one whenever it refuses
// or fails a request itself, and hands it to the writer of WithErrorWriter
// when there is one. It names the problem and says what the client should
// do; it never carries a stored response, nor the text of an internal error.
// Its JSON form is the body the middleware writes by default.
type Problem struct {
	// Type is the problem type's URI: the base of WithProblemTypeBase
	// followed by Slug.
	Type string `json:"type"`
	// Title names the kind of problem, the same for every occurrence.
	Title string `json:"title"`
	// Status is the HTTP status of the response.
	Status int `json:"status"`
	// Detail says what happened to this request and what the client should
	// do. It is written for the client.
	Detail string `json:"detail"`
	// Slug names the kind of problem on its own, such as "key-reused",
	// whatever the base: docs/http.md lists them. An API with an error
	// format of its own can map it to its own codes.
	Slug string `json:"-"`
	// RetryAfter is the delay the client should wait before it retries, or
	// zero when the problem asks for none. The middleware has already set
	// it, in whole seconds, as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
}

// kind is a problem before the options have given it its type's base and
// its retry delay.
type kind struct {
	slug, title string
	status      int
	detail      string
	// retry, when set, asks the client to wait before it retries: it gets a
	// Retry-After header.
	retry bool
}

// answering is the problem that says a, an answer of the table that
// idemgrpc answers by too (internal/answer), in title and detail: its
// slug, its status and whether it asks for a retry are the table's, so
// that a client is told over HTTP what it is told over gRPC.
func answering(a answer.Answer, title, detail string) kind {
	return kind{slug: a.Slug, title: title, status: a.Status, detail: detail, retry: a.Retry}
}

// The problems, by their slug.
func problemInvalidKey(header, reason string) kind {
	return answering(answer.InvalidKey, "Malformed idempotency key",
		"The "+header+" header is malformed: "+reason+". Send 1 to 255 printable ASCII characters, as they are or as a quoted string.")
}

// problemKeyRefused is the answer to a key that WithKeyValidator refused;
// the reason is the validator's error message, which the option documents
// as written for the client.
func problemKeyRefused(header, reason string) kind {
	return answering(answer.InvalidKey, "Malformed idempotency key",
		"The "+header+" header is not a key this API accepts: "+sentence(reason)+" Nothing was done; send a valid key.")
}

func problemKeyRequired(header string) kind {
	return answering(answer.KeyRequired, "Idempotency key required",
		"This request must carry an "+header+" header: a unique value, such as a random UUID, chosen once for this request and sent again with each retry of it.")
}

// problemBodyInvalid is the answer to a body that WithBodyCanonicalizer
// refused; the reason is the canonicalizer's error message, which the
// option documents as written for the client. The body's problems are
// HTTP's alone: a gRPC message arrives decoded.
func problemBodyInvalid(reason string) kind {
	return kind{slug: "body-invalid", title: "Request body not accepted", status: http.StatusBadRequest,
		detail: "The request body is not accepted: " + sentence(reason) + " Nothing was done; fix the body before sending it again."}
}

var (
	problemScope = answering(answer.ClientUnknown, "Client not identified",
		"The server could not tell which client sent this request, so it cannot keep its idempotency key apart from other clients' keys. Nothing was done.")
	problemBodyUnreadable = kind{slug: "body-unreadable", title: "Request body unreadable", status: http.StatusBadRequest,
		detail: "The request body could not be read. Nothing was done; send the request again with the same key."}
	problemKeyReused = answering(answer.KeyReused, "Idempotency key reused",
		"This idempotency key was used for a different request (another method, path, query or body). Nothing was done. Use a new key for a new request.")
	problemInFlight = answering(answer.InFlight, "Request in progress",
		"A request with this idempotency key is still being processed. Nothing was done; send the same request with the same key again after the Retry-After delay to get its response.")
	problemConflict = answering(answer.Conflict, "Conflict with concurrent requests",
		"The request conflicted with concurrent requests and was not carried out. Send it again with the same key after the Retry-After delay.")
	problemCommitUnknown = answering(answer.OutcomeUnknown, "Outcome unknown",
		"The server lost contact with its database while saving this request, and cannot tell whether it was saved. Send the same request with the same key again after the Retry-After delay: you will get its response if it was saved, and it will run if it was not.")
	problemResponseTooLarge = answering(answer.ResponseTooLarge, "Response too large to store",
		"The response to this request was too large to be stored for retries, so the request was undone. Sending it again will fail the same way.")
	problemRecordDamaged = answering(answer.RecordDamaged, "Stored response damaged",
		"This idempotency key has a stored response that is damaged, so it cannot be sent back, and the request is not run again. Ask the API's operator to look at the key.")
	problemUnfinished = answering(answer.Unfinished, "Request unfinished",
		"This request stopped before it finished, perhaps after some of its steps were carried out. Send the same request with the same key again after the Retry-After delay: it resumes where it stopped, and no step that was done is done again.")
	problemMethod = kind{slug: "method-not-allowed", title: "Method not allowed", status: http.StatusMethodNotAllowed,
		detail: "This endpoint runs requests only with an idempotency key and one of the methods in the Allow header. Nothing was done."}
	problemInternal = answering(answer.InternalError, "Internal error",
		"A server error stopped this request before it was carried out; nothing was saved. Send it again with the same key later.")
)

func problemBodyTooLarge(limit int64) kind {
	return kind{slug: "body-too-large", title: "Request body too large", status: http.StatusRequestEntityTooLarge,
		detail: "The request body is larger than " + strconv.FormatInt(limit, 10) + " bytes, the most this endpoint accepts. Nothing was done."}
}

// problemOf is the problem that says a, the table's answer to an outcome
// or an error of the Runner (answer.Outcome, answer.DoTx, answer.Run).
func problemOf(a answer.Answer) kind {
	switch a {
	case answer.KeyReused:
		return problemKeyReused
	case answer.InFlight:
		return problemInFlight
	case answer.Conflict:
		return problemConflict
	case answer.OutcomeUnknown:
		return problemCommitUnknown
	case answer.Unfinished:
		return problemUnfinished
	case answer.ResponseTooLarge:
		return problemResponseTooLarge
	case answer.RecordDamaged:
		return problemRecordDamaged
	}
	return problemInternal
}

// problem is k under the options of c: its type under c's base, and c's
// retry delay when k asks for one.
func (c *config) problem(k kind) Problem {
	p := Problem{Type: c.problemBase + k.slug, Title: k.title, Status: k.status, Detail: k.detail, Slug: k.slug}
	if k.retry {
		p.RetryAfter = c.retryAfter
	}
	return p
}

// writeProblem answers r with the problem k. Whoever writes the body, the
// refusal is never cached, since the same request may succeed later, and
// carries its Retry-After, since retrying on time is part of the protocol
// the client follows, not of the API's error format.
func (c *config) writeProblem(w http.ResponseWriter, r *http.Request, k kind) {
	c.writeProblemAfter(w, r, k, 0)
}

// writeProblemAfter is writeProblem, asking the client to wait at least
// after before it retries: the lease left to the runner of a multi-step
// request, which no retry can take over sooner.
func (c *config) writeProblemAfter(w http.ResponseWriter, r *http.Request, k kind, after time.Duration) {
	p := c.problem(k)
	if k.retry {
		p.RetryAfter = max(p.RetryAfter, after)
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(seconds(p.RetryAfter), 10))
	}
	if c.errorWriter == nil {
		writeProblemJSON(w, p)
		return
	}
	sw := &statusWatch{ResponseWriter: w}
	c.errorWriter(sw, r, p)
	if !sw.wrote {
		// A writer that wrote nothing would let net/http answer 200, and a
		// refusal would pass for a success.
		w.WriteHeader(p.Status)
	}
}

// writeProblemJSON writes p as application/problem+json, the default form.
func writeProblemJSON(w http.ResponseWriter, p Problem) {
	body, err := json.Marshal(p)
	if err != nil {
		// Four strings and a number always marshal; this is unreachable.
		body = []byte(`{"status":` + strconv.Itoa(p.Status) + `}`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// statusWatch tells whether an error writer wrote a status or a body.
type statusWatch struct {
	http.ResponseWriter
	wrote bool
}

func (s *statusWatch) WriteHeader(code int) {
	if code >= 200 { // an informational response is not the answer
		s.wrote = true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWatch) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (s *statusWatch) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// sentence ends reason, a message written by the API, with one full stop.
func sentence(reason string) string {
	return strings.TrimRight(strings.TrimSpace(reason), ".") + "."
}

// seconds rounds d up to whole seconds, as Retry-After counts them.
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
