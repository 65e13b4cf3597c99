// Package idemgrpc is a gRPC unary server interceptor that makes calls
// idempotent: a call that carries an idempotency key in its metadata does
// its work at most once, however often the client sends it, and every retry
// gets the first reply back.
//
// It is the gRPC counterpart of package idemhttp, and like it is built on
// [idem.Store.DoTx]: the key is claimed in the same SQL transaction as the
// handler's effect, so the key and the effect commit together or not at
// all. [UnaryServerInterceptor] runs on a *sql.DB;
// [UnaryServerInterceptorWithRunner] takes an [idem.Runner], the same that
// idemhttp's middleware takes, for another driver: on a pgx pool,
// idempgx.Runner, whose handlers find their pgx.Tx with idempgx.Tx. Both
// adapters answer each outcome and error with the same code, status and
// reason, from one table.
//
//	store, _ := idem.New(idem.Postgres())
//	protect, err := idemgrpc.UnaryServerInterceptor(store, db, nil, // nil: the database's transaction defaults
//		idemgrpc.WithMethods("/shop.v1.Orders/Place"),
//		idemgrpc.WithScope(func(ctx context.Context) (string, error) { return accountID(ctx) }),
//		idemgrpc.WithKeyRequired(),
//	)
//	if err != nil { ... } // a bad configuration fails here, at start-up
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(authenticate, protect))
//
//	func (s *orders) Place(ctx context.Context, req *shopv1.PlaceRequest) (*shopv1.Order, error) {
//		tx := idemgrpc.Tx(ctx) // write the effect here; do not commit
//		...
//	}
//
// # Which calls are protected
//
// gRPC has no method that is unsafe by definition, as HTTP's POST is, so
// the interceptor protects the methods that [WithMethods] lists, or that
// [WithMethodFilter] accepts, and the multi-step methods of
// [WithStepMethods]; calls of other methods pass straight through.
// A call of a protected method is protected when it carries the key
// metadata, "idempotency-key" by default ([WithKeyMetadata]). Without a key
// it fails with InvalidArgument if the key is [WithKeyRequired], and runs
// unprotected otherwise, with [Tx] returning nil.
//
// A key is 1 to 255 printable ASCII characters, in one metadata value,
// neither starting nor ending with a space: the rules of idemhttp, without
// the quoted form that HTTP headers have.
//
// # The fingerprint
//
// A key belongs to one call. The call's request hash is
// idem.Fingerprint("idemgrpc/1", scope, full method name, request), each
// part framed by its length, where the request is the request message in
// protobuf's deterministic encoding (proto.MarshalOptions{Deterministic:
// true}), unknown fields included, sorted by their encoding in the request
// and in every message within its known fields, so that a newer client's
// fields that the server does not know, such as a map's entries, count in
// whatever order they come. A call with the same key and another
// client scope, method or message is refused with FailedPrecondition and
// never runs. The deterministic encoding is stable for one build of a
// server, not across versions of the protobuf library or of the message's
// definition: a retry that reaches a server built otherwise may be refused
// as a different call, never run twice.
//
// # What a protected call gets
//
//   - the first call: the handler runs with a context that carries the
//     transaction (see [Tx]) and the call's idem.Identity, its stored key
//     and scope, which idem.IdentityFrom reads: the handler keys its own
//     rows by it, not by the client's raw key, which two clients may
//     share. The Store's Events carry the scope. If it returns a reply, the reply is stored, in
//     its deterministic encoding, and the transaction commits before the
//     reply leaves. If it returns an error, the transaction rolls back,
//     nothing is stored, and the client gets the error as the handler
//     returned it, unless [WithStoredErrors] makes its code final.
//   - a retry of a finished call: the stored reply, decoded into a new
//     message of the method's reply type, with the header metadata
//     "idempotent-replayed: true". The handler does not run. The reply type
//     comes from the method's descriptor in protoregistry.GlobalFiles (and
//     the Go type registered for it, or dynamicpb where there is none), so
//     replays work after a restart as well.
//   - the key was used for a different call: FailedPrecondition.
//   - the first call is still running: Unavailable, which gRPC retry
//     policies retry, with a retry pushback.
//
// Every answer of the interceptor's own carries a google.rpc.ErrorInfo
// detail with [ErrorDomain] and one of the Reason constants, so that a
// client can tell it from the handler's errors. docs/grpc.md in the
// repository has the table of codes and the reasons behind each.
//
// # Multi-step calls
//
// A method whose call must call another system cannot do its work in one
// transaction. Name it with [WithStepMethods]: the interceptor identifies
// its calls as the others', begins no transaction, and its handler returns
// what [Run] returns, which runs the call's steps with [idem.Store.Run]
// (the Runner's Run), each phase in a transaction of its own. The Final step makes the reply
// with [Reply]; a step that ends the call early stores an error made with
// [StoredError]. A call that another call runs, or whose dead runner's
// lease has not run out, gets Unavailable with a pushback of at least the
// lease that is left, and one whose step failed gets Unavailable
// (UNFINISHED): the retry resumes it where it stopped. docs/phases.md in
// the repository has the table of outcomes.
//
// # What the handler must do
//
// Write the effect in Tx(ctx) (idempgx.Tx(ctx) on a pgx pool), and nothing
// but that transaction: a message published or another service called is
// not undone by a rollback, and may happen more than once. Do not commit or
// roll back the transaction.
// Expect to run more than once for one call, each time in a fresh
// transaction, when the database reports a conflict. The header and
// trailer metadata that the handler sets reach the client with the answer
// of the attempt that counted, and are neither stored nor replayed;
// grpc.SendHeader only adds to the header, which leaves with the answer.
// grpc.SetSendCompressor and grpc.ClientSupportedCompressors fail in a
// protected handler, because the handler's context holds the
// interceptor's stream, not gRPC's own. A panic rolls the transaction
// back, stores nothing and goes on up the stack, to whatever recovers it.
//
// # The retention window
//
// A key counts for the Store's retention window ([idem.WithRetention], 24
// hours by default) from its first call. A retry within the window replays;
// a call with the same key after it runs again, as a new call. Publish the
// window to the service's clients.
package idemgrpc
