package idemgrpc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemgrpc"
)

// protect returns the interceptor on e's store and database with opts,
// which must be valid, for a service with a single client.
func (e *env) protect(t *testing.T, opts ...idemgrpc.Option) grpc.UnaryServerInterceptor {
	t.Helper()
	return e.protectScoped(t, append(opts, idemgrpc.WithSingleClient())...)
}

// protectScoped is protect for opts that choose a scope themselves.
func (e *env) protectScoped(t *testing.T, opts ...idemgrpc.Option) grpc.UnaryServerInterceptor {
	t.Helper()
	ic, err := e.interceptor(e.Store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// start serves a new shop on e with the interceptor made of opts, and
// returns the shop and a client connection.
func (e *env) start(t *testing.T, opts ...idemgrpc.Option) (*shop, *grpc.ClientConn) {
	t.Helper()
	s := &shop{e: e}
	return s, serve(t, s, e.protect(t, opts...))
}

// startScoped is start for opts that choose a scope themselves.
func (e *env) startScoped(t *testing.T, opts ...idemgrpc.Option) (*shop, *grpc.ClientConn) {
	t.Helper()
	s := &shop{e: e}
	return s, serve(t, s, e.protectScoped(t, opts...))
}

// protected are the methods the tests protect.
var protected = idemgrpc.WithMethods(placeMethod, shipMethod)

// deterministic is the deterministic encoding of m.
func deterministic(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantRan fails the test unless a is the answer of the handler's run n,
// not a replay.
func wantRan(t *testing.T, a answer, n int) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("call failed: %v; want the answer of run %d", a.err, n)
	}
	if got := a.header.Get("x-run"); len(got) != 1 || got[0] != fmt.Sprint(n) {
		t.Errorf("x-run = %q, want %d", got, n)
	}
	if got := a.header.Get(idemgrpc.ReplayedMetadata); len(got) != 0 {
		t.Errorf("%s = %q on a call that ran the handler", idemgrpc.ReplayedMetadata, got)
	}
}

// wantReplay fails the test unless a replays first: the same message, in
// the same deterministic encoding, marked as a replay, without the
// handler's metadata.
func wantReplay(t *testing.T, a, first answer) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("replay failed: %v", a.err)
	}
	if !proto.Equal(a.reply, first.reply) {
		t.Errorf("replay = %v, want %v", a.reply, first.reply)
	}
	if got, want := deterministic(t, a.reply), deterministic(t, first.reply); string(got) != string(want) {
		t.Errorf("replay encodes as %x, want %x", got, want)
	}
	wantMarked(t, a)
}

func wantMarked(t *testing.T, a answer) {
	t.Helper()
	if got := a.header.Get(idemgrpc.ReplayedMetadata); len(got) != 1 || got[0] != "true" {
		t.Errorf("%s = %q, want true", idemgrpc.ReplayedMetadata, got)
	}
	if got := a.header.Get("x-run"); len(got) != 0 {
		t.Errorf("a replay carries the handler's header x-run = %q", got)
	}
	if got := a.trailer.Get("x-trailer"); len(got) != 0 {
		t.Errorf("a replay carries the handler's trailer x-trailer = %q", got)
	}
}

// wantRefusal fails the test unless a is the interceptor's own answer with
// code and reason.
func wantRefusal(t *testing.T, a answer, code codes.Code, reason string) {
	t.Helper()
	st := status.Convert(a.err)
	if a.err == nil || st.Code() != code {
		t.Fatalf("got %v, want %v %s", a.err, code, reason)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			info = ei
		}
	}
	if info == nil || info.GetReason() != reason || info.GetDomain() != idemgrpc.ErrorDomain {
		t.Errorf("ErrorInfo = %v, want reason %s in domain %s", info, reason, idemgrpc.ErrorDomain)
	}
	if len(a.header.Get(idemgrpc.ReplayedMetadata)) != 0 || len(a.header.Get("x-run")) != 0 {
		t.Errorf("a refusal carries a header: %v", a.header)
	}
}

// wantPushback fails the test unless a asks for a retry after ms
// milliseconds, in the trailer and in a RetryInfo.
func wantPushback(t *testing.T, a answer, ms int) {
	t.Helper()
	if got := a.trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != fmt.Sprint(ms) {
		t.Errorf("grpc-retry-pushback-ms = %q, want %d", got, ms)
	}
	for _, d := range status.Convert(a.err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			if got := ri.GetRetryDelay().AsDuration(); got != time.Duration(ms)*time.Millisecond {
				t.Errorf("RetryInfo delay = %v, want %d ms", got, ms)
			}
			return
		}
	}
	t.Errorf("no RetryInfo in %v", a.err)
}

// wantNoRecord fails the test unless the key has no record.
func (e *env) wantNoRecord(t *testing.T, scope, key string) {
	t.Helper()
	if res, err := e.Store.Lookup(context.Background(), e.DB, idemgrpc.StoredKey(scope, key)); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup = %v, %v; want ErrNotFound: nothing must be stored", res.Outcome, err)
	}
}

func TestClaimThenReplay(t *testing.T) {
	forEachWay(t, func(t *testing.T, tg target, via string) {
		e := setupVia(t, tg, via)
		s, conn := e.start(t, protected)

		first := place(conn, "k1", "book")
		wantRan(t, first, 1)
		if got := first.trailer.Get("x-trailer"); len(got) != 1 || got[0] != "1" {
			t.Errorf("x-trailer = %q: the handler's trailer must reach the first answer", got)
		}
		if !s.sawTx.Load() {
			t.Error("the handler of a protected call had no transaction")
		}
		// The record holds the reply's deterministic encoding, byte for
		// byte, as OK.
		res, err := e.Store.Lookup(context.Background(), e.DB, idemgrpc.StoredKey("", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Response.Status != int(codes.OK) || string(res.Response.Body) != string(deterministic(t, first.reply)) {
			t.Errorf("stored %d %x, want 0 and the reply's encoding %x", res.Response.Status, res.Response.Body, deterministic(t, first.reply))
		}

		for range 2 {
			wantReplay(t, place(conn, "k1", "book"), first)
		}
		if n := s.runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if n := e.EffectCount(t, "k1"); n != 1 {
			t.Errorf("%d effect rows for k1, want 1", n)
		}

		// The same on a method whose reply type has no Go type: the
		// interceptor decodes the replay with dynamicpb.
		label := []byte{0, 0xff, 'x'}
		shipped := ship(conn, "k2", parcel("kettle", 1200, label))
		if shipped.err != nil {
			t.Fatal(shipped.err)
		}
		wantReplay(t, ship(conn, "k2", parcel("kettle", 1200, label)), shipped)
		if n := e.EffectCount(t, "k2"); n != 1 {
			t.Errorf("%d effect rows for k2, want 1", n)
		}

		// A new interceptor, as after a restart, knows the reply types
		// from the descriptors alone, and never runs the handler.
		s2 := &shop{e: e}
		conn2 := serve(t, s2, e.protect(t, protected))
		wantReplay(t, place(conn2, "k1", "book"), first)
		wantReplay(t, ship(conn2, "k2", parcel("kettle", 1200, label)), shipped)
		if n := s2.runs.Load(); n != 0 {
			t.Errorf("after the restart the handler ran %d times, want 0", n)
		}
	})
}

// TestFingerprintAsDocumented checks the request hash that the package
// documentation and docs/grpc.md give: a Do with that hash replays the
// call, and with any part changed it is a mismatch.
func TestFingerprintAsDocumented(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		_, conn := e.startScoped(t, protected, idemgrpc.WithScope(func(context.Context) (string, error) { return "acct_42", nil }))
		if a := place(conn, "k", "book"); a.err != nil {
			t.Fatal(a.err)
		}
		req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("book")}}
		hash := func(version, scope, method string) []byte {
			return idem.Fingerprint([]byte(version), []byte(scope), []byte(method), deterministic(t, req))
		}
		notRun := func(context.Context, *sql.Tx) (idem.Response, error) {
			t.Error("the Func ran")
			return idem.Response{}, nil
		}
		for _, c := range []struct {
			name string
			hash []byte
			want idem.Outcome
		}{
			{"as documented", hash("idemgrpc/1", "acct_42", placeMethod), idem.Replay},
			{"another version", hash("idemhttp/1", "acct_42", placeMethod), idem.Mismatch},
			{"another scope", hash("idemgrpc/1", "acct_43", placeMethod), idem.Mismatch},
			{"another method", hash("idemgrpc/1", "acct_42", peekMethod), idem.Mismatch},
		} {
			res, err := e.Store.DoTx(context.Background(), e.DB, nil, idemgrpc.StoredKey("acct_42", "k"), c.hash, notRun)
			if err != nil || res.Outcome != c.want {
				t.Errorf("%s: %v, %v; want %v", c.name, res.Outcome, err, c.want)
			}
		}
	})
}

func TestMismatch(t *testing.T) {
	forEachWay(t, func(t *testing.T, tg target, via string) {
		e := setupVia(t, tg, via)
		s, conn := e.start(t, protected)
		first := place(conn, "k", "book")
		wantRan(t, first, 1)
		// Another message, or another method, under the same key.
		wantRefusal(t, place(conn, "k", "kettle"), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
		wantRefusal(t, ship(conn, "k", parcel("book", 1, nil)), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
		// The key still replays its own call.
		wantReplay(t, place(conn, "k", "book"), first)
		if n := s.runs.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

func TestScopesKeepClientsApart(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		scope := func(ctx context.Context) (string, error) {
			if vs := metadata.ValueFromIncomingContext(ctx, "x-client"); len(vs) == 1 && vs[0] != "" {
				return vs[0], nil
			}
			return "", errors.New("no client")
		}
		var (
			mu       sync.Mutex
			reported []error
		)
		hook := idemgrpc.WithErrorHook(func(_ context.Context, method string, err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, fmt.Errorf("%s: %w", method, err))
		})
		s, conn := e.startScoped(t, protected, idemgrpc.WithScope(scope), hook)
		req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("book")}}
		as := func(client string) answer {
			return call(conn, placeMethod, req, new(structpb.Struct), idemgrpc.DefaultKeyMetadata, "k", "x-client", client)
		}
		alice := as("alice")
		wantRan(t, alice, 1)
		wantRan(t, as("bob"), 2) // the same key, another client: its own call
		wantReplay(t, as("alice"), alice)
		// A client the scope cannot name is refused before anything runs.
		wantRefusal(t, as(""), codes.Unauthenticated, idemgrpc.ReasonClientUnknown)
		if n := s.runs.Load(); n != 2 {
			t.Errorf("the handler ran %d times, want 2", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reported) != 1 || !strings.Contains(reported[0].Error(), "no client") || !strings.HasPrefix(reported[0].Error(), placeMethod) {
			t.Errorf("reported %v, want the scope function's error, once", reported)
		}
	})
}

func TestInFlight(t *testing.T) {
	forEachWay(t, func(t *testing.T, tg target, via string) {
		// Where the second call sees the key in flight, it waits the
		// 200 ms lock timeout for a first call that is released only
		// after the refusals, so no load can let the wait see it end;
		// nothing is timed.
		e := setupVia(t, tg, via, idem.WithLockTimeout(200*time.Millisecond))
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		s := &shop{e: e, before: func(ctx context.Context, method string) error {
			held := false
			once.Do(func() { held = true })
			if held {
				close(started)
				<-release // the key stays claimed, uncommitted
			}
			return nil
		}}
		conn := serve(t, s, e.protect(t, protected, idemgrpc.WithRetryPushback(1500*time.Microsecond)))

		done := make(chan answer, 1)
		go func() { done <- place(conn, "k", "book") }()
		<-started
		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			// SQLite has no in-flight key: the second call waits at
			// BEGIN for the first to finish, then replays it. The first
			// is released 300 ms from now, and the second waits for it
			// up to the 10 s busy timeout of dbtest.SQLiteParams, for each of
			// DoTx's attempts: load may stretch the 300 ms many times
			// over and the second still gets the lock. (If load delays
			// the second call past the release, it replays without
			// waiting, which passes too.)
			time.AfterFunc(300*time.Millisecond, func() { close(release) })
			second := place(conn, "k", "book")
			first := <-done
			wantRan(t, first, 1)
			wantReplay(t, second, first)
		} else {
			start := time.Now()
			second := place(conn, "k", "book")
			elapsed := time.Since(start)
			wantRefusal(t, second, codes.Unavailable, idemgrpc.ReasonInFlight)
			wantPushback(t, second, 2) // 1.5 ms, rounded up
			// The refusal comes after the lock timeout. The margin is
			// for a loaded machine, where the Store's tests saw
			// the right answer take up to 1.4 s more than its waits; a
			// wrong one that waited for the first call would run into
			// the call's 30 s deadline, as the release comes only after.
			const margin = 5 * time.Second
			if elapsed > 200*time.Millisecond+margin {
				t.Errorf("in flight after %v, want it within the 200 ms lock timeout and %v", elapsed, margin)
			}
			// A different call under the held key is in flight too: its
			// hash cannot be compared with an uncommitted record's.
			wantRefusal(t, place(conn, "k", "kettle"), codes.Unavailable, idemgrpc.ReasonInFlight)
			close(release)
			first := <-done
			wantRan(t, first, 1)
			wantReplay(t, place(conn, "k", "book"), first)
		}
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

// retryUnavailable is a service config whose retry policy retries
// UNAVAILABLE, as a client of an idempotent service would set it.
const retryUnavailable = `{"methodConfig": [{
	"name": [{"service": "idemgrpc.test.Shop"}],
	"retryPolicy": {
		"maxAttempts": 5,
		"initialBackoff": "0.01s",
		"maxBackoff": "0.1s",
		"backoffMultiplier": 2,
		"retryableStatusCodes": ["UNAVAILABLE"]
	}
}]}`

// TestClientRetryPolicyGetsTheReply shows a gRPC client's own retry policy
// turning an in-flight answer into the first call's reply: the retry
// carries the same key, waits the pushback, and replays.
func TestClientRetryPolicyGetsTheReply(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
			t.Skip("SQLite never answers in flight: a second call waits at BEGIN (TestInFlight/sqlite)")
		}
		// The first call is released when the second's first attempt
		// has been answered in flight. Each later attempt waits up to
		// the 2 s lock timeout for the first call to commit, which takes
		// milliseconds once released; four retries leave load a wide
		// margin.
		inFlight := make(chan struct{}, 16)
		e := setup(t, tg, idem.WithLockTimeout(2*time.Second), idem.WithObserver(func(_ context.Context, ev idem.Event) {
			if ev.Outcome == idem.InFlight {
				inFlight <- struct{}{}
			}
		}))
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		s := &shop{e: e, before: func(ctx context.Context, method string) error {
			held := false
			once.Do(func() { held = true })
			if held {
				close(started)
				<-release
			}
			return nil
		}}
		conn := serve(t, s, e.protect(t, protected, idemgrpc.WithRetryPushback(50*time.Millisecond)),
			grpc.WithDefaultServiceConfig(retryUnavailable))
		done := make(chan answer, 1)
		go func() { done <- place(conn, "k", "book") }()
		<-started
		go func() {
			<-inFlight
			close(release)
		}()
		second := place(conn, "k", "book")
		first := <-done
		wantRan(t, first, 1)
		wantReplay(t, second, first)
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
	})
}

func TestKeys(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		t.Run("optional", func(t *testing.T) {
			s, conn := e.start(t, protected)
			// Without a key, a protected method runs unprotected, every
			// time, with no transaction of the interceptor's.
			for i := 1; i <= 2; i++ {
				wantRan(t, place(conn, "", "book"), i)
				if s.sawTx.Load() {
					t.Error("a call without a key had a transaction")
				}
			}
		})
		t.Run("required", func(t *testing.T) {
			s, conn := e.start(t, protected, idemgrpc.WithKeyRequired())
			wantRefusal(t, place(conn, "", "book"), codes.InvalidArgument, idemgrpc.ReasonKeyRequired)
			for name, md := range map[string][]string{
				"empty":          {idemgrpc.DefaultKeyMetadata, ""},
				"too long":       {idemgrpc.DefaultKeyMetadata, strings.Repeat("k", idemgrpc.MaxClientKeyLength+1)},
				"twice":          {idemgrpc.DefaultKeyMetadata, "a", idemgrpc.DefaultKeyMetadata, "b"},
				"leading space":  {idemgrpc.DefaultKeyMetadata, " k"},
				"trailing space": {idemgrpc.DefaultKeyMetadata, "k "},
			} {
				req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("book")}}
				a := call(conn, placeMethod, req, new(structpb.Struct), md...)
				t.Run(name, func(t *testing.T) { wantRefusal(t, a, codes.InvalidArgument, idemgrpc.ReasonInvalidKey) })
			}
			// The longest key, and every printable character, are fine.
			wantRan(t, place(conn, strings.Repeat("k", idemgrpc.MaxClientKeyLength), "book"), 1)
			var all strings.Builder
			for c := byte(0x21); c <= 0x7e; c++ {
				all.WriteByte(c)
			}
			wantRan(t, place(conn, all.String()[:40]+" "+all.String()[40:], "book"), 2)
			if n := s.runs.Load(); n != 2 {
				t.Errorf("the handler ran %d times, want 2", n)
			}
		})
		t.Run("metadata name", func(t *testing.T) {
			s, conn := e.start(t, protected, idemgrpc.WithKeyMetadata("X-Request-Key"), idemgrpc.WithKeyRequired())
			req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("book")}}
			first := call(conn, placeMethod, req, new(structpb.Struct), "x-request-key", "rk")
			wantRan(t, first, 1)
			wantReplay(t, call(conn, placeMethod, req, new(structpb.Struct), "x-request-key", "rk"), first)
			// The default name means nothing now.
			wantRefusal(t, place(conn, "rk", "book"), codes.InvalidArgument, idemgrpc.ReasonKeyRequired)
			if n := s.runs.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
		})
	})
}

func TestUnprotectedMethod(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		s, conn := e.start(t, protected, idemgrpc.WithKeyRequired())
		req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("look")}}
		for range 2 {
			a := call(conn, peekMethod, req, new(structpb.Struct), idemgrpc.DefaultKeyMetadata, "k")
			if a.err != nil || !proto.Equal(a.reply, req) || len(a.header.Get(idemgrpc.ReplayedMetadata)) != 0 {
				t.Fatalf("Peek = %v, %v, %v; want its request echoed, not replayed", a.reply, a.err, a.header)
			}
			if s.sawTx.Load() {
				t.Error("an unprotected method had a transaction")
			}
		}
		// Nor does it need a key.
		if a := call(conn, peekMethod, req, new(structpb.Struct)); a.err != nil {
			t.Errorf("Peek without a key: %v", a.err)
		}
		e.wantNoRecord(t, "", "k")
	})
}

func TestMethodFilter(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		var (
			mu       sync.Mutex
			reported []string
		)
		s, conn := e.start(t,
			idemgrpc.WithMethodFilter(func(m string) bool { return m == placeMethod || m == ghostMethod }),
			idemgrpc.WithErrorHook(func(_ context.Context, method string, err error) {
				mu.Lock()
				defer mu.Unlock()
				reported = append(reported, method+": "+err.Error())
			}))
		first := place(conn, "k", "book")
		wantRan(t, first, 1)
		wantReplay(t, place(conn, "k", "book"), first)
		// Ship is not accepted: it runs every time.
		for range 2 {
			if a := ship(conn, "k2", parcel("pan", 1, nil)); a.err != nil || len(a.header.Get(idemgrpc.ReplayedMetadata)) != 0 {
				t.Errorf("Ship = %v, %v; want a run", a.err, a.header)
			}
		}
		if n := s.runs.Load(); n != 3 {
			t.Errorf("the handler ran %d times, want 3", n)
		}
		// A method the filter accepts but no registry knows fails closed.
		req := &structpb.Struct{}
		wantRefusal(t, call(conn, ghostMethod, req, new(structpb.Struct), idemgrpc.DefaultKeyMetadata, "g"), codes.Internal, idemgrpc.ReasonInternal)
		mu.Lock()
		defer mu.Unlock()
		if len(reported) != 1 || !strings.HasPrefix(reported[0], ghostMethod+": ") || !strings.Contains(reported[0], "not registered") {
			t.Errorf("reported %q, want the ghost method's lookup", reported)
		}
	})
}

func TestHandlerErrorStoresNothing(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		s, conn := e.start(t, protected)
		for i := 1; i <= 2; i++ {
			a := place(conn, "k", "book", fieldFail, "FAILED_PRECONDITION")
			st := status.Convert(a.err)
			// The handler's error, as it returned it: code, message
			// and details.
			if st.Code() != codes.FailedPrecondition || st.Message() != fmt.Sprintf("book refused in run %d", i) {
				t.Fatalf("got %v, want the handler's error of run %d", a.err, i)
			}
			if d := st.Details(); len(d) != 1 || !proto.Equal(d[0].(proto.Message), wrapperspb.String(fmt.Sprintf("detail of run %d", i))) {
				t.Errorf("details = %v, want the handler's", d)
			}
			// The metadata that the handler set reaches the client, and
			// the answer is not a replay.
			if got := a.header.Get("x-run"); len(got) != 1 || got[0] != fmt.Sprint(i) {
				t.Errorf("x-run = %q, want %d", got, i)
			}
			if len(a.header.Get(idemgrpc.ReplayedMetadata)) != 0 {
				t.Error("the handler's error is marked as a replay")
			}
		}
		// The effect rolled back each time, and the key stays free.
		if n := e.EffectCount(t, "k"); n != 0 {
			t.Errorf("%d effect rows, want 0", n)
		}
		e.wantNoRecord(t, "", "k")
		// A plain error too, and a reply of the wrong type, which the
		// interceptor refuses to store.
		wantRan(t, place(conn, "k", "book"), 3)
		if n := s.runs.Load(); n != 3 {
			t.Errorf("the handler ran %d times, want 3", n)
		}
		wantRefusal(t, place(conn, "w", "book", fieldWrong, "yes"), codes.Internal, idemgrpc.ReasonInternal)
		e.wantNoRecord(t, "", "w")
		if n := e.EffectCount(t, "w"); n != 0 {
			t.Errorf("%d effect rows for a reply of the wrong type, want 0", n)
		}
	})
}

func TestStoredErrors(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		s, conn := e.start(t, protected, idemgrpc.WithStoredErrors(codes.FailedPrecondition))
		first := place(conn, "k", "book", fieldFail, "FAILED_PRECONDITION")
		want := status.Convert(first.err)
		if want.Code() != codes.FailedPrecondition || want.Message() != "book refused in run 1" {
			t.Fatalf("got %v, want the handler's error", first.err)
		}
		if got := first.header.Get("x-run"); len(got) != 1 || got[0] != "1" {
			t.Errorf("x-run = %q, want 1", got)
		}
		for range 2 {
			a := place(conn, "k", "book", fieldFail, "FAILED_PRECONDITION")
			if got := status.Convert(a.err); !proto.Equal(got.Proto(), want.Proto()) {
				t.Errorf("replayed %v, want %v", got.Proto(), want.Proto())
			}
			wantMarked(t, a)
		}
		// The effect committed with the error, once.
		if n := e.EffectCount(t, "k"); n != 1 {
			t.Errorf("%d effect rows, want 1", n)
		}
		// A code that is not stored rolls back as before.
		if a := place(conn, "k2", "book", fieldFail, "NOT_FOUND"); status.Code(a.err) != codes.NotFound {
			t.Fatalf("got %v, want NotFound", a.err)
		}
		e.wantNoRecord(t, "", "k2")
		if n := s.runs.Load(); n != 2 {
			t.Errorf("the handler ran %d times, want 2", n)
		}
	})
}

// TestEffectOncePerKey sends many concurrent calls with a few keys: each
// key's effect happens once, and every call gets its key's reply, as it
// ran or replayed, or an in-flight refusal to retry.
func TestEffectOncePerKey(t *testing.T) {
	forEachWay(t, func(t *testing.T, tg target, via string) {
		e := setupVia(t, tg, via)
		s, conn := e.start(t, protected)
		keys := []string{"a", "b", "c", "d"}
		const copies = 6
		answers := make([][]answer, len(keys))
		var wg sync.WaitGroup
		for k, key := range keys {
			answers[k] = make([]answer, copies)
			for c := range copies {
				wg.Go(func() { answers[k][c] = place(conn, key, "item-"+key) })
			}
		}
		wg.Wait()
		for k, key := range keys {
			if n := e.EffectCount(t, key); n != 1 {
				t.Errorf("key %s: %d effect rows, want 1", key, n)
			}
			var ran, replayed int
			var reply proto.Message
			for _, a := range answers[k] {
				switch {
				case status.Code(a.err) == codes.Unavailable:
					wantRefusal(t, a, codes.Unavailable, idemgrpc.ReasonInFlight)
					continue
				case a.err != nil:
					t.Errorf("key %s: %v", key, a.err)
					continue
				case len(a.header.Get(idemgrpc.ReplayedMetadata)) == 1:
					replayed++
				default:
					ran++
				}
				if reply != nil && !proto.Equal(reply, a.reply) {
					t.Errorf("key %s: replies %v and %v differ", key, reply, a.reply)
				}
				reply = a.reply
			}
			if ran != 1 {
				t.Errorf("key %s: %d calls ran the handler, want 1 (and %d replays)", key, ran, replayed)
			}
		}
		if n := s.runs.Load(); n != int64(len(keys)) {
			t.Errorf("the handler ran %d times, want %d", n, len(keys))
		}
	})
}
