// Package idemhttp is net/http middleware that makes POST and PATCH requests
// idempotent: a request that carries an Idempotency-Key header does its work
// at most once, however often the client sends it, and every retry gets the
// first response back, byte for byte.
//
// It follows the IETF draft draft-ietf-httpapi-idempotency-key-header and
// the behaviour Stripe's API has taught clients to expect. Because the key
// is claimed in the same SQL transaction as the handler's effect (see the
// [idem] package), the key and the effect commit together or not at all.
//
//	store, err := idem.New(idem.Postgres())
//	...
//	mw, err := idemhttp.New(store, db, nil, // nil: the database's transaction defaults
//		idemhttp.WithScope(func(r *http.Request) (string, error) { return accountID(r) }),
//		idemhttp.WithKeyRequired(),
//	)
//	if err != nil {
//		return err // a bad configuration stops the start-up
//	}
//	mux.Handle("POST /orders", mw.Handler(http.HandlerFunc(createOrder)))
//
//	func createOrder(w http.ResponseWriter, r *http.Request) {
//		tx := idemhttp.Tx(r.Context()) // write the effect here; do not commit
//		...
//	}
//
// New runs on a *sql.DB. [NewWithRunner] takes an [idem.Runner] for another
// driver (idempgx.NewMiddleware passes idempgx.Runner, for a pgx pool),
// the same Runner that idemgrpc's interceptor takes; the middleware and the
// interceptor answer each outcome and error with the same status, code and
// reason, from one table.
//
// [Middleware.Handler] is a standard func(http.Handler) http.Handler, so it
// plugs into http.ServeMux, chi (r.Use(mw.Handler)) and gorilla/mux as it
// is. Frameworks with handlers of their own need care, because the
// middleware may run the handler more than once (DoTx runs the transaction
// again after a conflict) and stores whatever the handler wrote when it
// returns: echo's WrapMiddleware must see a handler's returned error
// written before it returns, and gin's c.Next runs the rest of a chain only
// once. The module examples/ecosystem in the repository has tested adapters
// for both, and for chi.
//
// # Multi-step requests
//
// An endpoint that calls another system in the middle of its work (a
// payment provider, a mail service) cannot do it in one transaction.
// [Middleware.Steps] serves it with [idem.Store.Run]: its function builds
// the request's steps from the request, each phase commits in a
// transaction of its own, and the Final step's response is stored and
// replayed. The request is identified as for Handler; a request that
// another call runs, or whose dead runner's lease has not run out, gets a
// 409 whose Retry-After is at least the lease that is left, and a step that
// failed a 503, after which a retry resumes the request where it stopped.
// docs/phases.md in the repository has the table of outcomes.
//
//	mux.Handle("POST /checkout", mw.Steps(func(r *http.Request) ([]idem.Step, error) {
//		order, err := readOrder(r)
//		if err != nil {
//			return nil, idem.Finish(idem.Response{Status: http.StatusBadRequest}) // stored nowhere
//		}
//		return checkoutSteps(order), nil // idem.Phase, idem.Call, ..., idem.Final
//	}))
//
// # Scope: without one, clients share keys
//
// New insists on a choice. [WithScope] names the client a request comes from
// (a tenant, an account, an API key), and the scope is part of the stored
// key and of the request's hash, so two clients that happen to choose the
// same key never meet. [WithSingleClient] declares that no scope is needed,
// and keys are global: a client that guesses or reuses another client's key
// gets that client's stored response, or blocks it with a 409, or learns
// from a 422 that the key is in use. Choose it only for an API with a
// single client, or whose keys are random and secret.
//
// # What a protected request gets
//
// A request is protected when its method is one of [WithMethods] (POST and
// PATCH by default) and it carries the key header. Other methods, and
// requests without a key when the key is not required ([WithKeyRequired]),
// pass straight through, with [Tx] returning nil.
//
// The middleware validates the key (400; [WithKeyValidator] adds the API's
// own rule), names the client (403 when the scope function fails), reads the
// body (413 beyond [WithMaxBodyBytes]), and hashes the request:
//
//	idem.Fingerprint([]byte("idemhttp/1"), []byte(scope), []byte(r.Method),
//		[]byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), body)
//
// The first part names the formula, so that a later formula can never
// produce the hash of a different request under this one; the scope is ""
// with WithSingleClient. With [WithBodyCanonicalizer], body is what the
// canonicalizer makes of the body (400 when it refuses it), so that retries
// that differ only in what the API ignores, such as a timestamp the client
// sets on each attempt, are one request; the handler still reads the body as
// sent. [Middleware.Identify] returns the stored key and
// this hash for a request, by the same code the middleware runs.
//
// Then it begins a transaction and calls the handler with a
// ResponseWriter that keeps the response in memory and a request whose
// context carries the transaction (see Tx) and whose body reads from the
// start. The context carries the request's idem.Identity too, which
// idem.IdentityFrom reads: its stored key and its scope, for the handler to
// key its own rows by the request rather than by the client's raw key,
// which two clients may share. The Store's Events carry the scope. The
// outcome decides what the client gets:
//
//   - first request, status stored: the transaction commits, and only then
//     does the response leave, as the handler wrote it. A commit whose
//     outcome DoTx cannot settle is a 503 instead, and the client's retry
//     does the work again or replays it, whichever is true.
//   - first request, status not stored (5xx by default, see
//     [WithStorePolicy]): the transaction rolls back, nothing is stored, and
//     the client gets the handler's response, if it fits the response limit
//     (below). A retry runs the handler again.
//   - a retry of a finished request: the stored status, the allow-listed
//     headers and the body, byte for byte, with Idempotent-Replayed: true.
//     The handler does not run.
//   - the key was used with a different request: 422.
//   - the first request is still running: 409 with Retry-After.
//   - the database reports a conflict that outlasts DoTx's retries: 503
//     with Retry-After. The handler may have run more than once, each time
//     in a transaction that was rolled back.
//
// The middleware's own refusals are application/problem+json (RFC 9457)
// bodies with a type, title, status and detail; they never carry a stored
// response or an internal error's text. docs/http.md in the repository lists
// them, and what a client should do on each. Their types link to that page
// unless [WithProblemTypeBase] names the API's own documentation, and
// [WithErrorWriter] writes them in the API's own error format instead.
//
// # What is stored
//
// The status, the body, and the headers on the [WithReplayHeaders]
// allow-list: by default, [DefaultReplayHeaders], the headers that say what
// the stored bytes are (Content-Type, Content-Encoding, the digests) and
// those a client or a cache relies on (Location, ETag, Vary and the like), so
// that a gzip body is replayed as gzip. A retry that no longer accepts the
// stored encoding still gets the stored bytes, with their Content-Encoding
// and Vary: it is the same request, and its answer is the original response.
// Other headers reach the first response only; Set-Cookie, Authorization and the
// hop-by-hop headers are never stored, whatever the list says.
//
// # The response limit
//
// A response may take as many bytes as the Store stores
// ([idem.WithMaxResponseBytes], 1 MiB by default), counted as the Store
// counts them: the body and the allow-listed headers, encoded, the
// Content-Type sniffed for a handler that sets none among them. The
// middleware reads the limit from the Store ([idem.Store.MaxResponseBytes]).
//
// The limit holds while the handler writes, not after: the response is
// held in memory until the handler returns, and one handler must not be
// able to fill the server's memory. The Write that would pass the limit
// keeps nothing and fails with an error that matches
// [idem.ErrResponseTooLarge], as does every Write after it, so a handler
// that streams should stop at the first error. The request then fails
// with a 500 response-too-large problem and rolls back, rather than commit
// an effect whose retry could not be answered; the key stays free. A 5xx
// over the limit gets the same 500, though it would not have been stored:
// it too would have been held whole before it was sent, and the client
// could not have been given the handler's response anyway.
//
// # The retention window
//
// A key counts for the Store's retention window ([idem.WithRetention], 24
// hours by default) from its first request. A retry within the window
// replays; a request with the same key after it runs again, as a new
// request. The window is part of the API's contract: publish it to the
// API's clients, and tell them to make a new decision, not a blind retry,
// once it has passed.
//
// # What the handler must do
//
// Write the effect in [Tx](r.Context()), and nothing but that transaction:
// an e-mail sent or another API called is not undone by a rollback, and may
// happen more than once. Do not commit or roll back the transaction. Expect
// to run more than once for one request, each time in a fresh transaction,
// when the database reports a conflict. Flush does nothing and Hijack is
// refused, since no byte may reach the client before the commit; streaming
// endpoints cannot be protected, and a Write past the response limit fails.
// A panic rolls the transaction back, stores
// nothing and goes on up the stack.
//
// The middleware logs nothing and raises no panic of its own: the errors
// behind its 5xx and 403 responses go to the hook of [WithErrorHook], if one
// is set. New reports a bad configuration, so that it stops the start-up;
// Handler, which cannot return an error, fails closed with a 500 on a nil
// handler. A response whose status net/http would panic on, outside 100 to
// 999, is answered with a 500 in its place (see [ErrInvalidStatus]): a
// handler's is never stored, and one that is stored, as Run stores a
// multi-step request's, gets a 500 record-damaged on every retry.
//
// # Testing a handler without a database
//
// A handler alone needs only its transaction: give it one with [WithTx],
// for example a transaction of go-sqlmock. To test it behind the
// middleware, package idemtest sets the expectations of the middleware's
// statements from [Middleware.Identify]: Mock.ExpectRequest for the claim,
// then the handler's own statements, then Mock.ExpectCompleteAny.
package idemhttp
