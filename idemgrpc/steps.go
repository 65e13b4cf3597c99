package idemgrpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/answer"
)

// stepsKey is the context key of a call of a method of WithStepMethods.
type stepsKey struct{}

// stepCall is a call of a method of WithStepMethods, as its handler's
// context carries it for Run.
type stepCall struct {
	i    *interceptor
	m    *method
	key  string // the stored key, with the scope
	hash []byte
	ran  bool // Run was called
}

// interceptSteps serves a call of m, a method of WithStepMethods: it
// identifies the call, which must carry a key, and calls the handler with
// a context that carries the call, for Run. A handler that answers without
// calling Run, as one that refuses a malformed request, stores nothing.
func (i *interceptor) interceptSteps(ctx context.Context, req any, m *method, handler grpc.UnaryHandler) (any, error) {
	cfg := &i.cfg
	key, scope, hash, present, err := i.identify(ctx, m.name, req)
	switch {
	case err != nil:
		return nil, err
	case !present:
		return nil, refuseKeyRequired(cfg.keyName).err(ctx, cfg.keyName, cfg.pushback)
	}
	return handler(context.WithValue(withScope(ctx, scope), stepsKey{}, &stepCall{i: i, m: m, key: key, hash: hash}), req)
}

// Run runs steps as the multi-step request of the call whose context is
// ctx, a call of a method that WithStepMethods names, with the Run of the
// interceptor's Runner (idem.Store.Run on the database of
// UnaryServerInterceptor), and returns the call's answer: the reply, or
// the error, that the Final step stored. The steps' Phase and Final take
// the Runner's transaction: a *sql.Tx, or a pgx.Tx on idempgx.Runner. The
// handler returns what Run returns:
//
//	func (s *shop) Checkout(ctx context.Context, req *shopv1.CheckoutRequest) (*shopv1.Receipt, error) {
//		return idemgrpc.Run[*shopv1.Receipt](ctx, s.checkoutSteps(req)...)
//	}
//
// The Final step makes its answer with Reply, and a step that ends the
// call early with idem.Finish makes a stored error with StoredError. R is
// the method's reply type. Each step's context carries the call's
// idem.Identity, with its scope: a step keys the rows it writes by
// idem.IdentityFrom, not by the client's raw key, which two clients may
// share.
//
// Run answers as the interceptor answers for DoTx, with two more cases
// that only a multi-step call has. A call that another call is running, or
// whose runner died and whose lease has not run out, gets Unavailable
// (IN_FLIGHT) with a pushback of at least the lease that is left, after
// which a retry takes the call over and resumes it. A step that failed
// gets Unavailable (UNFINISHED), with the pushback, and its error goes to
// the ErrorHook: the steps that committed stay done, and a retry with the
// same key resumes the call after them. docs/phases.md in the repository
// has the table.
//
// Run runs once per call. Called outside a call of a method of
// WithStepMethods, or a second time in one, it runs nothing and returns
// Internal.
func Run[R proto.Message](ctx context.Context, steps ...idem.Step) (R, error) {
	var zero R
	c, _ := ctx.Value(stepsKey{}).(*stepCall)
	switch {
	case c == nil:
		return zero, status.Error(codes.Internal, "idemgrpc: Run outside a call of a method of WithStepMethods")
	case c.ran:
		return zero, c.i.fail(ctx, c.m.name, refuseInternal, fmt.Errorf("idemgrpc: Run called twice in one call of %s", c.m.name))
	}
	c.ran = true
	res, err := c.i.run.Run(ctx, c.key, c.hash, steps)
	reply, err := c.answer(ctx, res, err)
	if err != nil {
		return zero, err
	}
	r, ok := reply.(R)
	if !ok {
		return zero, c.i.fail(ctx, c.m.name, refuseInternal, fmt.Errorf("idemgrpc: Run[%T] in a call of %s, whose reply is a %T", zero, c.m.name, reply))
	}
	return r, nil
}

// answer turns what Run returned into the call's answer.
func (c *stepCall) answer(ctx context.Context, res idem.Result, err error) (any, error) {
	i := c.i
	switch {
	case err == nil && res.Outcome == idem.Claimed:
		reply, rpcErr, err := decode(c.m, res.Response)
		if err != nil {
			return nil, i.fail(ctx, c.m.name, refuseRecordDamaged, err)
		}
		return reply, rpcErr
	case err == nil:
		return i.unclaimed(ctx, c.m, res)
	case ctx.Err() != nil:
		i.report(ctx, c.m.name, err)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, i.fail(ctx, c.m.name, stepsFailure(err), err)
}

// stepsFailure is the refusal that answers an error of Run, as the table
// says (answer.Run): a lease that another call took over as in flight, a
// mistake in the steps as an internal error, since no step ran, a lost
// commit, a stored answer that is too large or damaged as for DoTx, and
// anything else, a step's own error or a conflict that outlasted the
// retries, as a call that a retry resumes.
func stepsFailure(err error) refusal { return refusalOf(answer.Run.Of(err)) }

// Reply returns the stored form of reply, the answer of the call whose
// context is ctx, for its Final step to return: reply must be a message of
// the method's reply type.
func Reply(ctx context.Context, reply proto.Message) (idem.Response, error) {
	c, err := stepCallOf(ctx)
	if err != nil {
		return idem.Response{}, err
	}
	return encodeReply(c.m, reply)
}

// StoredError returns the stored form of err, a status error with a code
// that is a final answer (those that WithStoredErrors accepts), for a step
// of the call whose context is ctx to end the call with, through
// idem.Finish or from its Final step: a declined card, say. Every retry
// gets the same error back, marked as a replay.
func StoredError(ctx context.Context, err error) (idem.Response, error) {
	c, cerr := stepCallOf(ctx)
	if cerr != nil {
		return idem.Response{}, cerr
	}
	st, ok := status.FromError(err)
	switch {
	case err == nil:
		return idem.Response{}, fmt.Errorf("idemgrpc: StoredError of a nil error: %w", idem.ErrInvalidArgument)
	case !ok || !storableCodes[st.Code()]:
		return idem.Response{}, fmt.Errorf("idemgrpc: StoredError of %v, whose code %v is not a final answer: %w", err, st.Code(), idem.ErrInvalidArgument)
	}
	return encodeStatus(c.m, st)
}

// stepCallOf returns the call that ctx, or a context made from it, carries.
func stepCallOf(ctx context.Context) (*stepCall, error) {
	c, _ := ctx.Value(stepsKey{}).(*stepCall)
	if c == nil {
		return nil, fmt.Errorf("idemgrpc: not in a call of a method of WithStepMethods: %w", idem.ErrInvalidArgument)
	}
	return c, nil
}
