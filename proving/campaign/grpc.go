package campaign

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
)

// The gRPC service of the workload, campaign.Shop, spelt out as a file
// descriptor so that it needs no generated code: Pay is the payment,
// Checkout the multi-step checkout; each takes and answers a Struct,
// whose field "body" carries the body that the work made.
const shopFile = `
name: "idem/campaign/shop.proto"
package: "campaign"
syntax: "proto3"
dependency: "google/protobuf/struct.proto"
service {
  name: "Shop"
  method { name: "Pay" input_type: ".google.protobuf.Struct" output_type: ".google.protobuf.Struct" }
  method { name: "Checkout" input_type: ".google.protobuf.Struct" output_type: ".google.protobuf.Struct" }
}`

const (
	methodPay      = "/campaign.Shop/Pay"
	methodCheckout = "/campaign.Shop/Checkout"
)

func init() {
	var file descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(shopFile), &file); err != nil {
		panic(err)
	}
	fd, err := protodesc.NewFile(&file, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		panic(err)
	}
}

// The metadata that carries what HTTP's headers carry.
const (
	mdClient = "x-client"
	mdShard  = "x-shard"
	mdOp     = "x-op"
)

// serveGRPC serves campaign.Shop behind idemgrpc's interceptor on a free
// port of loopback, and returns its address.
func (s *service) serveGRPC(ctx context.Context) (string, error) {
	intercept, err := idemgrpc.UnaryServerInterceptor(s.store, s.db, nil,
		idemgrpc.WithMethods(methodPay), idemgrpc.WithStepMethods(methodCheckout),
		idemgrpc.WithScope(func(ctx context.Context) (string, error) {
			return first(metadata.ValueFromIncomingContext(ctx, mdClient)), nil
		}))
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcShard, intercept))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "campaign.Shop",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Pay", Handler: s.grpcHandler(methodPay, s.grpcPay)},
			{MethodName: "Checkout", Handler: s.grpcHandler(methodCheckout, s.grpcCheckout)},
		},
	}, nil)
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	return ln.Addr().String(), nil
}

// grpcShard puts the call's shard value, from its metadata, in its
// context.
func grpcShard(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	shard, err := strconv.ParseInt(first(metadata.ValueFromIncomingContext(ctx, mdShard)), 10, 64)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "bad x-shard")
	}
	return handler(tracked(idem.WithShard(ctx, shard)), req)
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// grpcHandler is the method handler of a service desc for serve.
func (s *service) grpcHandler(full string, serve func(ctx context.Context) (*structpb.Struct, error)) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := new(structpb.Struct)
		if err := dec(req); err != nil {
			return nil, err
		}
		return ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: full}, func(ctx context.Context, _ any) (any, error) {
			return serve(ctx)
		})
	}
}

func (s *service) grpcPay(ctx context.Context) (*structpb.Struct, error) {
	resp, err := pay(ctx, s, sqlExec, idemgrpc.Tx(ctx), first(metadata.ValueFromIncomingContext(ctx, mdOp)))
	if err != nil {
		return nil, err
	}
	return reply(resp), nil
}

func (s *service) grpcCheckout(ctx context.Context) (*structpb.Struct, error) {
	return idemgrpc.Run[*structpb.Struct](mark(ctx, PointPhaseCommit), checkout(s, sqlExec, first(metadata.ValueFromIncomingContext(ctx, mdOp)), grpcFinal)...)
}

// reply is the Struct that carries resp's body.
func reply(resp idem.Response) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{"body": structpb.NewStringValue(string(resp.Body))}}
}

// grpcFinal turns the checkout's response into the reply that idemgrpc
// stores for a Checkout call.
func grpcFinal(ctx context.Context, resp idem.Response) (idem.Response, error) {
	return idemgrpc.Reply(ctx, reply(resp))
}

// overGRPC sends op to the service at addr through a client with
// idemgrpc's interceptor, with op's key in the call's metadata, and reads
// the answer as a client would.
func overGRPC(ctx context.Context, addr string, op Op) Answer {
	keys, err := idemgrpc.UnaryClientInterceptor()
	if err != nil {
		return Answer{Outcome: "error", Err: err.Error()}
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(keys))
	if err != nil {
		return Answer{Outcome: "lost", Err: err.Error()}
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultKeyMetadata, op.Key,
		mdClient, op.Scope, mdShard, strconv.FormatInt(op.Shard, 10), mdOp, op.ID())
	method := methodPay
	if KindOfKey(op.Key) == KindCheckout {
		method = methodCheckout
	}
	req, _ := structpb.NewStruct(map[string]any{"request": op.Request})
	out := new(structpb.Struct)
	var header metadata.MD
	err = conn.Invoke(ctx, method, req, out, grpc.Header(&header))
	if err != nil {
		st := status.Convert(err)
		var reason string
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		switch {
		case reason == idemgrpc.ReasonKeyReused:
			return Answer{Outcome: "mismatch"}
		case reason == idemgrpc.ReasonInFlight:
			return Answer{Outcome: "inflight"}
		case st.Code() == codes.Unavailable && reason == "":
			return Answer{Outcome: "lost", Err: err.Error()}
		}
		return Answer{Outcome: "error", Err: err.Error()}
	}
	a := Answer{Outcome: "claimed", Body: []byte(out.GetFields()["body"].GetStringValue())}
	if first(header.Get(idemgrpc.ReplayedMetadata)) == "true" {
		a.Outcome = "replay"
	}
	var b Body
	if json.Unmarshal(a.Body, &b) == nil {
		a.Inc = b.Inc
	}
	return a
}

// isGRPC reports whether op goes over gRPC.
func isGRPC(op Op) bool { return op.Surface == SurfaceGRPC }

// grpcKey reports whether a stored key is that of a gRPC call: its
// client's key, after the scope's hash and a colon, starts with grpcPrefix.
func grpcKey(stored string) bool {
	_, key, ok := strings.Cut(stored, ":")
	return ok && strings.HasPrefix(key, grpcPrefix)
}
