package idemhttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// problemTypes is where the middleware's problem types are explained: each
// type is this document with a fragment, one per kind of refusal, so that a
// client can tell them apart and a developer can read what to do.
const problemTypes = "https://github.com/idemgo/idem/blob/main/docs/http.md#"

// problem is an RFC 9457 problem detail. The middleware answers with one
// whenever it refuses or fails a request itself. It names the problem and
// says what the client should do; it never carries a stored response, nor
// the text of an internal error.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// retry, when set, is sent as Retry-After.
	retry bool
}

// The problems, by the fragment of their type.
func problemInvalidKey(header, reason string) problem {
	return problem{Type: problemTypes + "invalid-key", Title: "Malformed idempotency key", Status: http.StatusBadRequest,
		Detail: "The " + header + " header is malformed: " + reason + ". Send 1 to 255 printable ASCII characters, as they are or as a quoted string."}
}

func problemKeyRequired(header string) problem {
	return problem{Type: problemTypes + "key-required", Title: "Idempotency key required", Status: http.StatusBadRequest,
		Detail: "This request must carry an " + header + " header: a unique value, such as a random UUID, chosen once for this request and sent again with each retry of it."}
}

var (
	problemScope = problem{Type: problemTypes + "client-unknown", Title: "Client not identified", Status: http.StatusForbidden,
		Detail: "The server could not tell which client sent this request, so it cannot keep its idempotency key apart from other clients' keys. Nothing was done."}
	problemBodyUnreadable = problem{Type: problemTypes + "body-unreadable", Title: "Request body unreadable", Status: http.StatusBadRequest,
		Detail: "The request body could not be read. Nothing was done; send the request again with the same key."}
	problemKeyReused = problem{Type: problemTypes + "key-reused", Title: "Idempotency key reused", Status: http.StatusUnprocessableEntity,
		Detail: "This idempotency key was used for a different request (another method, path, query or body). Nothing was done. Use a new key for a new request."}
	problemInFlight = problem{Type: problemTypes + "in-flight", Title: "Request in progress", Status: http.StatusConflict, retry: true,
		Detail: "A request with this idempotency key is still being processed. Nothing was done; send the same request with the same key again after the Retry-After delay to get its response."}
	problemConflict = problem{Type: problemTypes + "conflict", Title: "Conflict with concurrent requests", Status: http.StatusServiceUnavailable, retry: true,
		Detail: "The request conflicted with concurrent requests and was not carried out. Send it again with the same key after the Retry-After delay."}
	problemCommitUnknown = problem{Type: problemTypes + "outcome-unknown", Title: "Outcome unknown", Status: http.StatusServiceUnavailable, retry: true,
		Detail: "The server lost contact with its database while saving this request, and cannot tell whether it was saved. Send the same request with the same key again after the Retry-After delay: you will get its response if it was saved, and it will run if it was not."}
	problemResponseTooLarge = problem{Type: problemTypes + "response-too-large", Title: "Response too large to store", Status: http.StatusInternalServerError,
		Detail: "The response to this request was too large to be stored for retries, so the request was undone. Sending it again will fail the same way."}
	problemRecordDamaged = problem{Type: problemTypes + "record-damaged", Title: "Stored response damaged", Status: http.StatusInternalServerError,
		Detail: "This idempotency key has a stored response that is damaged, so it cannot be sent back, and the request is not run again. Ask the API's operator to look at the key."}
	problemInternal = problem{Type: problemTypes + "internal-error", Title: "Internal error", Status: http.StatusInternalServerError,
		Detail: "A server error stopped this request before it was carried out; nothing was saved. Send it again with the same key later."}
)

func problemBodyTooLarge(limit int64) problem {
	return problem{Type: problemTypes + "body-too-large", Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
		Detail: "The request body is larger than " + strconv.FormatInt(limit, 10) + " bytes, the most this endpoint accepts. Nothing was done."}
}

// write sends p. A refusal is never cached: the same request may succeed
// later.
func (p problem) write(w http.ResponseWriter, retryAfter time.Duration) {
	body, err := json.Marshal(p)
	if err != nil {
		// Four strings and a number always marshal; this is unreachable.
		body = []byte(`{"status":` + strconv.Itoa(p.Status) + `}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.retry {
		h.Set("Retry-After", strconv.FormatInt(seconds(retryAfter), 10))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// seconds rounds d up to whole seconds, as Retry-After counts them.
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
