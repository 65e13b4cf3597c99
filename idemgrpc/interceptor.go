package idemgrpc

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/answer"
)

// ReplayedMetadata marks a replayed answer: the header metadata
// "idempotent-replayed: true", as idemhttp's Idempotent-Replayed header.
// An answer without it ran the handler.
const ReplayedMetadata = "idempotent-replayed"

// fingerprintVersion starts every request hash, so that a change of what
// the hash covers can never make an old record match a new call, and so
// that a gRPC call never matches an HTTP request of package idemhttp.
const fingerprintVersion = "idemgrpc/1"

// Tx returns the transaction in which the handler of a protected call must
// write its effect, so that the effect commits with the record of the key
// or not at all. The interceptor begins it and ends it: the handler must
// neither commit nor roll it back, nor write its effect anywhere else. It
// is idem.TxFrom for a *sql.Tx, and so the same as idemhttp.Tx; on another
// driver, the handler finds its transaction with that driver's function
// (idempgx.Tx, for a pgx.Tx, under UnaryServerInterceptorWithRunner with
// idempgx.Runner).
//
// Tx returns nil when the call is not protected: its method is not one the
// interceptor protects, or it carries no key and the key is not required. A
// handler that may see such calls opens its own transaction then, or
// refuses.
func Tx(ctx context.Context) *sql.Tx {
	return idem.TxFrom[*sql.Tx](ctx)
}

// UnaryServerInterceptor returns an interceptor that makes the calls of the
// methods it protects idempotent with store, in transactions it begins on
// db. Install it with grpc.UnaryInterceptor or grpc.ChainUnaryInterceptor,
// after the interceptors that authenticate the client. See the package
// documentation for what it answers.
//
// A bad configuration (a nil store or database, an option that refuses its
// argument, no methods to protect) is an error that names every problem,
// so that it fails at start-up, and wraps idem.ErrInvalidArgument, as the
// Store's own refusals do; neither this function nor the interceptor panics
// of its own.
//
// txOpts are the options of every transaction the interceptor begins, one
// per attempt of a protected call, such as its isolation level; nil leaves
// them to the database's defaults. A copy is kept, so a change to *txOpts
// afterwards changes nothing. A conflict that the database reports under a
// stricter level makes the interceptor run the handler again, up to DoTx's
// attempts. They are an argument, as they are of idem.Store.DoTx and of
// idemhttp.New. It is UnaryServerInterceptorWithRunner with
// idem.SQLRunner(store, db, txOpts).
func UnaryServerInterceptor(store *idem.Store, db *sql.DB, txOpts *sql.TxOptions, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	return newInterceptor(store, idem.SQLRunner(store, db, txOpts), "nil database", opts)
}

// UnaryServerInterceptorWithRunner is UnaryServerInterceptor for a
// database that run reaches, through any driver: the protected calls run
// through run's DoTx, and those of WithStepMethods through its Run, which
// are the Store's on that database. run must run on store; the options
// are UnaryServerInterceptor's, and the transactions' options are given
// where run is made. For a pgx pool, run is idempgx.Runner(store, pool,
// txOpts): handlers find their pgx.Tx with idempgx.Tx, and the phases of a
// multi-step call take one. The same Runner serves idemhttp's middleware
// (idemhttp.NewWithRunner).
func UnaryServerInterceptorWithRunner(store *idem.Store, run idem.Runner, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	return newInterceptor(store, run, "nil runner", opts)
}

// newInterceptor checks what both constructors share, with run nil when
// the database or the runner is missing, which noRun says.
func newInterceptor(store *idem.Store, run idem.Runner, noRun string, opts []Option) (grpc.UnaryServerInterceptor, error) {
	i := &interceptor{store: store, run: run, cfg: defaultConfig()}
	var errs []error
	if store.Dialect() == nil {
		errs = append(errs, fmt.Errorf("idemgrpc: nil store, or a Store not made by idem.New: %w", idem.ErrInvalidArgument))
	}
	if run == nil {
		errs = append(errs, fmt.Errorf("idemgrpc: %s: %w", noRun, idem.ErrInvalidArgument))
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&i.cfg); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case i.cfg.methods != nil && i.cfg.filter != nil:
		errs = append(errs, fmt.Errorf("idemgrpc: WithMethods and WithMethodFilter both given: choose one: %w", idem.ErrInvalidArgument))
	case i.cfg.methods == nil && i.cfg.filter == nil && i.cfg.steps == nil:
		errs = append(errs, fmt.Errorf("idemgrpc: no methods to protect: give WithMethods, WithMethodFilter or WithStepMethods: %w", idem.ErrInvalidArgument))
	}
	for _, name := range slices.Sorted(maps.Keys(i.cfg.steps)) {
		if i.cfg.methods[name] != nil {
			errs = append(errs, fmt.Errorf("idemgrpc: %s is in WithMethods and in WithStepMethods: choose one: %w", name, idem.ErrInvalidArgument))
		}
	}
	if i.cfg.scoped == i.cfg.single {
		errs = append(errs, fmt.Errorf("idemgrpc: choose WithScope, so that one client's keys never meet another's, or WithSingleClient, when keys may be global: keys are per client unless the service says otherwise: %w", idem.ErrInvalidArgument))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return i.intercept, nil
}

type interceptor struct {
	store    *idem.Store
	run      idem.Runner
	cfg      config
	resolved sync.Map // full method name to *method, for WithMethodFilter
}

// handlerError carries the handler's own error through DoTx, which rolls
// back and returns it; the client gets it as the handler returned it.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

// attempt is one run of the handler in one of DoTx's transactions.
type attempt struct {
	stream *capture
	reply  any
	err    error         // the handler's
	resp   idem.Response // what the attempt asked DoTx to store
}

func (i *interceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	cfg := &i.cfg
	var full string
	if info != nil {
		full = info.FullMethod
	}
	if m, ok := cfg.steps[full]; ok {
		return i.interceptSteps(ctx, req, m, handler)
	}
	m, protect, err := i.method(full)
	switch {
	case !protect:
		return handler(ctx, req)
	case err != nil:
		return nil, i.fail(ctx, full, refuseInternal, err)
	}
	key, scope, hash, present, err := i.identify(ctx, full, req)
	switch {
	case err != nil:
		return nil, err
	case !present && cfg.required:
		return nil, refuseKeyRequired(cfg.keyName).err(ctx, cfg.keyName, cfg.pushback)
	case !present:
		return handler(ctx, req)
	}
	ctx = withScope(ctx, scope)

	var last *attempt // the attempt that ran the handler last
	res, err := i.run.DoTx(ctx, key, hash,
		func(ctx context.Context) (idem.Response, error) { // ctx carries the Runner's transaction
			a := &attempt{stream: newCapture(full)}
			last = a
			hctx := grpc.NewContextWithServerTransportStream(ctx, a.stream)
			a.reply, a.err = handler(hctx, req)
			resp, err := i.response(m, a.reply, a.err)
			if err != nil {
				return idem.Response{}, err
			}
			a.resp = resp
			return resp, nil
		})
	var he *handlerError
	switch {
	case err == nil && res.Outcome == idem.Claimed:
		return i.claimed(ctx, m, last, res.Response)
	case err == nil:
		return i.unclaimed(ctx, m, res)
	case errors.Is(err, idem.ErrRetry):
		// Before the handler's own error: a conflict that the handler's
		// statement ran into is answered as the table says, the client
		// retries, and the driver's error stays here.
		return nil, i.fail(ctx, full, failure(err), err)
	case errors.As(err, &he):
		if error(he) != err {
			// Do had more to say, such as a transaction that ended
			// under it; the client gets the handler's error all the same.
			i.report(ctx, full, err)
		}
		i.forward(ctx, full, last)
		return nil, he.err
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, i.fail(ctx, full, failure(err), err)
}

// identify returns the stored key, the scope ("" with WithSingleClient)
// and the request hash of a call of the method full with the request req,
// or present false when the call carries no key. Its error is the status
// that refuses the call.
func (i *interceptor) identify(ctx context.Context, full string, req any) (key, scope string, hash []byte, present bool, err error) {
	cfg := &i.cfg
	key, present, kerr := parseKey(metadata.ValueFromIncomingContext(ctx, cfg.keyName))
	switch {
	case kerr != nil:
		return "", "", nil, false, refuseInvalidKey(cfg.keyName, kerr.reason).err(ctx, cfg.keyName, cfg.pushback)
	case !present:
		return "", "", nil, false, nil
	}
	if cfg.scope != nil {
		scope, err = cfg.scope(ctx)
		if err == nil && scope == "" {
			err = errors.New("the scope function returned an empty scope")
		}
		if err != nil {
			return "", "", nil, false, i.fail(ctx, full, refuseClientUnknown, fmt.Errorf("idemgrpc: scope: %w", err))
		}
	}
	msg, err := message(req)
	if err != nil {
		return "", "", nil, false, i.fail(ctx, full, refuseInternal, fmt.Errorf("idemgrpc: request of %s: %w", full, err))
	}
	b, err := canonicalEncoding(msg)
	if err != nil {
		return "", "", nil, false, i.fail(ctx, full, refuseInternal, fmt.Errorf("idemgrpc: encode the request of %s: %w", full, err))
	}
	hash = idem.Fingerprint([]byte(fingerprintVersion), []byte(scope), []byte(full), b)
	return StoredKey(scope, key), scope, hash, true, nil
}

// withScope returns ctx with the call's scope, which the Store hands on to
// the call's idem.Identity and to its Events; ctx as it is without one.
func withScope(ctx context.Context, scope string) context.Context {
	if scope == "" {
		return ctx
	}
	return idem.WithScope(ctx, scope)
}

// method tells whether the interceptor protects the method full, and
// returns it.
func (i *interceptor) method(full string) (m *method, protect bool, err error) {
	if i.cfg.methods != nil {
		m, protect = i.cfg.methods[full]
		return m, protect, nil
	}
	if i.cfg.filter == nil || !i.cfg.filter(full) {
		return nil, false, nil // WithStepMethods alone
	}
	if m, ok := i.resolved.Load(full); ok {
		return m.(*method), true, nil
	}
	m, err = resolve(full)
	if err != nil {
		return nil, true, err
	}
	i.resolved.Store(full, m)
	return m, true, nil
}

// message returns the request as a protocol buffer message.
func message(req any) (proto.Message, error) {
	switch m := req.(type) {
	case proto.Message:
		return m, nil
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m), nil
	}
	return nil, fmt.Errorf("%T is not a protocol buffer message", req)
}

// response returns what is stored for the handler's answer: a reply, or an
// error that WithStoredErrors makes final. Any other error of the handler
// comes back as a handlerError, and a reply that cannot be stored as an
// error of its own; then DoTx rolls back and stores nothing.
func (i *interceptor) response(m *method, reply any, herr error) (idem.Response, error) {
	if herr != nil {
		st, ok := status.FromError(herr)
		if !ok || !i.cfg.stored[st.Code()] {
			return idem.Response{}, &handlerError{herr}
		}
		return encodeStatus(m, st)
	}
	return encodeReply(m, reply)
}

// encodeStatus returns the stored form of the error st of a call of m: its
// code, and the status in protobuf's deterministic encoding.
func encodeStatus(m *method, st *status.Status) (idem.Response, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(st.Proto())
	if err != nil {
		return idem.Response{}, fmt.Errorf("idemgrpc: encode the status of %s: %w", m.name, err)
	}
	return idem.Response{Status: int(st.Code()), Body: b}, nil
}

// encodeReply returns the stored form of reply, the answer to a call of
// m, which must be a message of m's reply type: the code OK, and the reply
// in protobuf's deterministic encoding.
func encodeReply(m *method, reply any) (idem.Response, error) {
	msg, err := message(reply)
	if err != nil {
		return idem.Response{}, fmt.Errorf("idemgrpc: reply of %s: %w", m.name, err)
	}
	r := msg.ProtoReflect()
	switch {
	case !r.IsValid():
		return idem.Response{}, fmt.Errorf("idemgrpc: reply of %s: the handler returned a nil %T", m.name, reply)
	case r.Descriptor().FullName() != m.reply.Descriptor().FullName():
		return idem.Response{}, fmt.Errorf("idemgrpc: reply of %s: the handler returned a %s, want %s",
			m.name, r.Descriptor().FullName(), m.reply.Descriptor().FullName())
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return idem.Response{}, fmt.Errorf("idemgrpc: encode the reply of %s: %w", m.name, err)
	}
	return idem.Response{Status: int(codes.OK), Body: b}, nil
}

// claimed answers a call that claimed its key and committed: with the
// handler's own reply or error, and the metadata it set, when the last
// attempt is the one that committed, as it nearly always is. When DoTx
// settled a lost commit by finding an earlier attempt's record, the answer
// is decoded from that record, which is what retries will get too.
func (i *interceptor) claimed(ctx context.Context, m *method, last *attempt, stored idem.Response) (any, error) {
	if last != nil && last.resp.Status == stored.Status && bytes.Equal(last.resp.Body, stored.Body) {
		i.forward(ctx, m.name, last)
		if last.err != nil {
			return nil, last.err
		}
		return last.reply, nil
	}
	reply, rpcErr, err := decode(m, stored)
	if err != nil {
		return nil, i.fail(ctx, m.name, refuseRecordDamaged, err)
	}
	return reply, rpcErr
}

// unclaimed answers the outcomes of a call that this one did not run, as
// the table says (answer.Outcome): a replay of its stored answer, a
// mismatch, or a call that another holds, which is asked to wait at least
// for the lease left to a multi-step call's runner.
func (i *interceptor) unclaimed(ctx context.Context, m *method, res idem.Result) (any, error) {
	a, ok := answer.Outcome(res.Outcome)
	if !ok { // a Replay; Claimed is answered before
		return i.replay(ctx, m, res.Response)
	}
	return nil, refusalOf(a).err(ctx, i.cfg.keyName, max(i.cfg.pushback, res.LeaseLeft))
}

// replay answers a call from the stored answer of an earlier one, marked
// with ReplayedMetadata.
func (i *interceptor) replay(ctx context.Context, m *method, stored idem.Response) (any, error) {
	reply, rpcErr, err := decode(m, stored)
	if err != nil {
		return nil, i.fail(ctx, m.name, refuseRecordDamaged, err)
	}
	if stream := grpc.ServerTransportStreamFromContext(ctx); stream != nil {
		if err := stream.SetHeader(metadata.Pairs(ReplayedMetadata, "true")); err != nil {
			i.report(ctx, m.name, fmt.Errorf("idemgrpc: mark the replay: %w", err))
		}
	}
	return reply, rpcErr
}

// decode turns a stored answer back into a reply of the method's type, or
// the stored error (rpcErr). err means it cannot be replayed.
func decode(m *method, stored idem.Response) (reply any, rpcErr error, err error) {
	if stored.Status == int(codes.OK) {
		msg := m.reply.New().Interface()
		if err := proto.Unmarshal(stored.Body, msg); err != nil {
			return nil, nil, fmt.Errorf("idemgrpc: the stored reply of %s does not decode as %s: %w", m.name, m.reply.Descriptor().FullName(), err)
		}
		return msg, nil, nil
	}
	var st spb.Status
	if err := proto.Unmarshal(stored.Body, &st); err != nil {
		return nil, nil, fmt.Errorf("idemgrpc: the stored error of %s does not decode: %w", m.name, err)
	}
	if int(st.GetCode()) != stored.Status || st.GetCode() == int32(codes.OK) {
		return nil, nil, fmt.Errorf("idemgrpc: the stored error of %s has code %d under status %d", m.name, st.GetCode(), stored.Status)
	}
	return nil, status.ErrorProto(&st), nil
}

// forward passes the metadata that the attempt's handler set on to the
// call.
func (i *interceptor) forward(ctx context.Context, full string, a *attempt) {
	if a == nil {
		return
	}
	if err := a.stream.forward(grpc.ServerTransportStreamFromContext(ctx)); err != nil {
		i.report(ctx, full, fmt.Errorf("idemgrpc: pass on the handler's metadata: %w", err))
	}
}

// fail reports err and returns the refusal's status error.
func (i *interceptor) fail(ctx context.Context, full string, r refusal, err error) error {
	i.report(ctx, full, err)
	return r.err(ctx, i.cfg.keyName, i.cfg.pushback)
}

func (i *interceptor) report(ctx context.Context, full string, err error) {
	if i.cfg.onError != nil {
		i.cfg.onError(ctx, full, err)
	}
}
