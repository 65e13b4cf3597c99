package idemgrpc_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
)

// accountMetadata names the client of a call in the tests of scopes, as
// a service's authentication would.
const accountMetadata = "x-account"

// byAccount is the scope function of those tests.
func byAccount(ctx context.Context) (string, error) {
	if vs := metadata.ValueFromIncomingContext(ctx, accountMetadata); len(vs) > 0 {
		return vs[0], nil
	}
	return "", errors.New("no account")
}

// identityShop serves Place and Checkout of idemgrpc.test.Shop: each
// piece of their work notes the idem.Identity it found in its context,
// Place's handler in the call's transaction and Checkout's Phase, Call
// and Final in a multi-step call. It also keeps the scope of each Event
// of the Store.
type identityShop struct {
	mu     sync.Mutex
	ids    map[string]idem.Identity
	scopes []string
}

func (s *identityShop) note(ctx context.Context, who string) {
	id, ok := idem.IdentityFrom(ctx)
	if !ok {
		id.Key = "none in the context"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[who] = id
}

func (s *identityShop) observe(_ context.Context, e idem.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopes = append(s.scopes, e.Scope)
}

func (s *identityShop) place(ctx context.Context) (proto.Message, error) {
	s.note(ctx, "place")
	return &structpb.Struct{}, nil
}

func (s *identityShop) checkout(ctx context.Context) (proto.Message, error) {
	return idemgrpc.Run[*structpb.Struct](ctx,
		idem.Phase("order", func(ctx context.Context, _ *sql.Tx) error { s.note(ctx, "order"); return nil }),
		idem.Call("charge", func(ctx context.Context, _ string) error { s.note(ctx, "charge"); return nil }),
		idem.Final("confirm", func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
			s.note(ctx, "confirm")
			return idemgrpc.Reply(ctx, &structpb.Struct{})
		}))
}

// identityUnary is the handler of a unary method of identityShop, as
// protoc-gen-go-grpc writes it.
func identityUnary(full string, call func(s *identityShop, ctx context.Context) (proto.Message, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := new(structpb.Struct)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, _ any) (any, error) { return call(srv.(*identityShop), ctx) }
		return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
	}
}

var identityShopDesc = grpc.ServiceDesc{
	ServiceName: shopService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Place", Handler: identityUnary(placeMethod, (*identityShop).place)},
		{MethodName: "Checkout", Handler: identityUnary(checkoutMethod, (*identityShop).checkout)},
	},
	Metadata: "idemgrpc/test/shop.proto",
}

// TestIdentityBehindTheInterceptor shows that the handler of a protected
// method, and the Phase, Call and Final steps of a method of
// WithStepMethods, find their call's idem.Identity in their context, on
// every database: the stored key and the scope that WithScope's function
// gave, empty with WithSingleClient. The Store's Events carry the same
// scope.
func TestIdentityBehindTheInterceptor(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		s := &identityShop{ids: map[string]idem.Identity{}}
		e := setup(t, tg, idem.WithObserver(s.observe))
		for _, c := range []struct {
			name, account string
			opt           idemgrpc.Option
		}{
			{"scoped", "acct_42", idemgrpc.WithScope(byAccount)},
			{"single client", "", idemgrpc.WithSingleClient()},
		} {
			t.Run(c.name, func(t *testing.T) {
				ic, err := idemgrpc.UnaryServerInterceptor(e.Store, e.DB, nil, c.opt,
					idemgrpc.WithMethods(placeMethod), idemgrpc.WithStepMethods(checkoutMethod))
				if err != nil {
					t.Fatal(err)
				}
				conn := serveIdentityShop(t, s, ic)
				for _, m := range []struct {
					method, key string
					who         []string
				}{
					{placeMethod, "5b0c", []string{"place"}},
					{checkoutMethod, "7d2e", []string{"order", "charge", "confirm"}},
				} {
					md := []string{idemgrpc.DefaultKeyMetadata, m.key}
					if c.account != "" {
						md = append(md, accountMetadata, c.account)
					}
					if a := call(conn, m.method, &structpb.Struct{}, new(structpb.Struct), md...); a.err != nil {
						t.Fatalf("%s: %v", m.method, a.err)
					}
					s.mu.Lock()
					for _, w := range m.who {
						got, want := s.ids[w], idemgrpc.StoredKey(c.account, m.key)
						if got.Key != want || got.Scope != c.account || got.Shard != nil {
							t.Errorf("%s saw %+v; want key %q, scope %q, no shard value", w, got, want, c.account)
						}
					}
					s.mu.Unlock()
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if len(s.scopes) != 2 || s.scopes[0] != c.account || s.scopes[1] != c.account {
					t.Errorf("the events' scopes are %q, want the calls', %q, twice", s.scopes, c.account)
				}
				s.scopes = nil
			})
		}
	})
}

// serveIdentityShop serves s with the interceptor ic, and returns a
// client connection; both end with t.
func serveIdentityShop(t *testing.T, s *identityShop, ic grpc.UnaryServerInterceptor) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(ic))
	srv.RegisterService(&identityShopDesc, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
