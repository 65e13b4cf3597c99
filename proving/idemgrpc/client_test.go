package idemgrpc_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem/idemgrpc"
)

// rawCodec passes messages through as the bytes they are on the wire, for
// lossyProxy, which forwards calls it cannot decode.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// lossyProxy stands between the clients and the server and hurts the
// attempts of each call, which the x-intention metadata names: the first
// attempt reaches the server, which commits, and its answer is lost
// (Unavailable, as when a connection drops); the second is refused before
// it reaches the server; the third and later go through.
type lossyProxy struct {
	backend *grpc.ClientConn
	mu      sync.Mutex
	seen    map[string]int
}

func (p *lossyProxy) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(stream.Context())
	intention := strings.Join(md.Get("x-intention"), "")
	p.mu.Lock()
	p.seen[intention]++
	n := p.seen[intention]
	p.mu.Unlock()
	if n == 2 {
		return status.Error(codes.Unavailable, "connection reset before the server")
	}
	var out []byte
	var header metadata.MD
	err := p.backend.Invoke(metadata.NewOutgoingContext(stream.Context(), md), method, &in, &out,
		grpc.ForceCodec(rawCodec{}), grpc.Header(&header))
	switch {
	case n == 1:
		return status.Error(codes.Unavailable, "the answer was lost") // the server has committed
	case err != nil:
		return err
	}
	if err := stream.SetHeader(header); err != nil {
		return err
	}
	return stream.SendMsg(&out)
}

// retryPolicy retries UNAVAILABLE, as docs/grpc.md advises.
const retryPolicy = `{"methodConfig": [{"name": [{"service": "idemgrpc.test.Shop"}],
	"retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
		"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// TestClientKeysAndRetryPolicy sends calls of Place, each with a client
// whose retry policy retries UNAVAILABLE, through lossyProxy, to the
// interceptor on every database: with UnaryClientInterceptor, every
// attempt of a call carries one key, and each call has one effect and the
// reply stored for it, a replay; without it, the same calls carry no key,
// and the handler runs once per attempt that reached the server, twice
// per call.
func TestClientKeysAndRetryPolicy(t *testing.T) {
	forEachWay(t, func(t *testing.T, tg target, via string) {
		e := setupVia(t, tg, via)
		s, backend := e.start(t, protected)
		proxySrv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler((&lossyProxy{backend: backend, seen: map[string]int{}}).handle))
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = proxySrv.Serve(lis) }()
		defer proxySrv.Stop()

		keyed, err := idemgrpc.UnaryClientInterceptor(idemgrpc.WithClientMethods(placeMethod))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			opts []grpc.DialOption
			once bool
		}{
			{"a key per call", []grpc.DialOption{grpc.WithUnaryInterceptor(keyed)}, true},
			{"no key", nil, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), append(c.opts,
					grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(retryPolicy))...)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				runs := s.runs.Load()
				const calls = 8
				var wg sync.WaitGroup
				answers := make([]answer, calls)
				for i := range calls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						item := fmt.Sprintf("%s %d", c.name, i)
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						ctx = metadata.AppendToOutgoingContext(ctx, "x-intention", item)
						req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue(item)}}
						a := answer{reply: new(structpb.Struct)}
						a.err = conn.Invoke(ctx, placeMethod, req, a.reply, grpc.Header(&a.header))
						answers[i] = a
					}()
				}
				wg.Wait()
				if got := s.runs.Load() - runs; c.once && got != calls || !c.once && got != 2*calls {
					t.Errorf("the handler ran %d times for %d calls", got, calls)
				}
				notes := map[string]int{}
				for _, ns := range e.Effects.Notes(t) {
					for _, n := range ns {
						notes[n]++
					}
				}
				for i, a := range answers {
					item := fmt.Sprintf("%s %d", c.name, i)
					n := notes[placeMethod+" "+item]
					switch {
					case a.err != nil:
						t.Errorf("%s: %v", item, a.err)
					case c.once && (n != 1 || len(a.header.Get(idemgrpc.ReplayedMetadata)) != 1):
						t.Errorf("%s: %d effects, replayed %q; want 1 and the stored reply", item, n, a.header.Get(idemgrpc.ReplayedMetadata))
					}
				}
			})
		}
	})
}

// TestClientInterceptorKeepsTheCallsKey shows that a key the call's
// metadata carries is sent as it is, and that bad options are refused.
func TestClientInterceptorKeepsTheCallsKey(t *testing.T) {
	ic, err := idemgrpc.UnaryClientInterceptor()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		md, _ := metadata.FromOutgoingContext(ctx)
		got = md.Get(idemgrpc.DefaultKeyMetadata)
		return nil
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), idemgrpc.DefaultKeyMetadata, "order-17")
	if err := ic(ctx, placeMethod, nil, nil, nil, invoker); err != nil || len(got) != 1 || got[0] != "order-17" {
		t.Errorf("the call's own key: sent %q (%v), want order-17", got, err)
	}
	if err := ic(context.Background(), placeMethod, nil, nil, nil, invoker); err != nil || len(got) != 1 || len(got[0]) < 26 {
		t.Errorf("a new key: sent %q (%v), want one of at least 128 random bits", got, err)
	}
	only, err := idemgrpc.UnaryClientInterceptor(idemgrpc.WithClientMethods(shipMethod), idemgrpc.WithClientKeyMetadata("x-key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := only(context.Background(), placeMethod, nil, nil, nil, invoker); err != nil || len(got) != 0 {
		t.Errorf("a method left out: sent %q, want no key", got)
	}
	if _, err := idemgrpc.UnaryClientInterceptor(idemgrpc.WithClientMethods("Place"), idemgrpc.WithClientKeyMetadata("grpc-key")); err == nil ||
		!strings.Contains(err.Error(), "Place") || !strings.Contains(err.Error(), "grpc-key") {
		t.Errorf("bad options: %v, want both named", err)
	}
}
