package idemgrpc_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/dbtest"
)

// The test service, idemgrpc.test.Shop, is described here by hand, as
// protoc would describe it from
//
//	syntax = "proto3";
//	package idemgrpc.test;
//	import "google/protobuf/struct.proto";
//	message Parcel { string item = 1; int64 weight = 2; bytes label = 3; }
//	message Receipt { string item = 1; int64 number = 2; bytes label = 3; repeated string notes = 4; }
//	service Shop {
//	  rpc Place(google.protobuf.Struct) returns (google.protobuf.Struct);
//	  rpc Ship(Parcel) returns (Receipt);
//	  rpc Peek(google.protobuf.Struct) returns (google.protobuf.Struct);
//	  rpc Watch(google.protobuf.Struct) returns (stream google.protobuf.Struct);
//	  rpc Checkout(google.protobuf.Struct) returns (google.protobuf.Struct);
//	}
//
// and registered in protoregistry.GlobalFiles, where generated code would
// register it, so that no protoc is needed. Place's messages are
// well-known types with Go types of their own; Parcel and Receipt have
// none, so the interceptor makes Receipts with dynamicpb.
const (
	shopService    = "idemgrpc.test.Shop"
	placeMethod    = "/" + shopService + "/Place"
	shipMethod     = "/" + shopService + "/Ship"
	peekMethod     = "/" + shopService + "/Peek"
	watchMethod    = "/" + shopService + "/Watch"
	checkoutMethod = "/" + shopService + "/Checkout"
)

// parcelType and receiptType are the messages of Ship.
var parcelType, receiptType protoreflect.MessageType

func init() {
	str := func(s string) *string { return &s }
	i32 := func(n int32) *int32 { return &n }
	field := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, label descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: str(name), JsonName: str(name), Number: i32(num), Type: typ.Enum(), Label: label.Enum()}
	}
	opt, rep := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	const (
		tString = descriptorpb.FieldDescriptorProto_TYPE_STRING
		tInt64  = descriptorpb.FieldDescriptorProto_TYPE_INT64
		tBytes  = descriptorpb.FieldDescriptorProto_TYPE_BYTES
	)
	method := func(name, in, out string, serverStreams bool) *descriptorpb.MethodDescriptorProto {
		m := &descriptorpb.MethodDescriptorProto{Name: str(name), InputType: str(in), OutputType: str(out)}
		if serverStreams {
			m.ServerStreaming = proto.Bool(true)
		}
		return m
	}
	file := &descriptorpb.FileDescriptorProto{
		Name:       str("idemgrpc/test/shop.proto"),
		Package:    str("idemgrpc.test"),
		Syntax:     str("proto3"),
		Dependency: []string{"google/protobuf/struct.proto"},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: str("Parcel"), Field: []*descriptorpb.FieldDescriptorProto{
				field("item", 1, tString, opt), field("weight", 2, tInt64, opt), field("label", 3, tBytes, opt),
			}},
			{Name: str("Receipt"), Field: []*descriptorpb.FieldDescriptorProto{
				field("item", 1, tString, opt), field("number", 2, tInt64, opt), field("label", 3, tBytes, opt), field("notes", 4, tString, rep),
			}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: str("Shop"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("Place", ".google.protobuf.Struct", ".google.protobuf.Struct", false),
				method("Ship", ".idemgrpc.test.Parcel", ".idemgrpc.test.Receipt", false),
				method("Peek", ".google.protobuf.Struct", ".google.protobuf.Struct", false),
				method("Watch", ".google.protobuf.Struct", ".google.protobuf.Struct", true),
				method("Checkout", ".google.protobuf.Struct", ".google.protobuf.Struct", false),
			},
		}},
	}
	_ = structpb.Struct{} // registers google/protobuf/struct.proto, on which the file depends
	fd, err := protodesc.NewFile(file, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		panic(err)
	}
	parcelType = dynamicpb.NewMessageType(fd.Messages().ByName("Parcel"))
	receiptType = dynamicpb.NewMessageType(fd.Messages().ByName("Receipt"))
}

// shop serves idemgrpc.test.Shop. Place and Ship write an effect row in
// the call's transaction, when there is one, and answer with the number
// of the run; Peek writes nothing and echoes its request.
type shop struct {
	e *env
	// runs counts the runs of Place and Ship; sawTx is whether the last
	// run had a transaction.
	runs  atomic.Int64
	sawTx atomic.Bool
	// before, when set, runs first in every handler, with the method's
	// full name; it may block, or fail the call.
	before func(ctx context.Context, method string) error
	// provider is the URL of the payment provider of Checkout, and die,
	// when set, is called at each of checkout.Points.
	provider string
	die      func(point string)
	// steps, when set, are Checkout's steps instead of the checkout's.
	steps func(item string) []idem.Step
}

// The request fields that Place's handler acts on.
const (
	fieldItem  = "item"
	fieldFail  = "fail"  // a code name: write the effect, then fail with that code
	fieldWrong = "wrong" // answer with a message of the wrong type
)

func (s *shop) place(ctx context.Context, req *structpb.Struct) (proto.Message, error) {
	item := req.GetFields()[fieldItem].GetStringValue()
	if err := s.effect(ctx, placeMethod+" "+item); err != nil {
		return nil, err
	}
	n := s.runs.Add(1)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-run", fmt.Sprint(n)))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", fmt.Sprint(n)))
	if name := req.GetFields()[fieldFail].GetStringValue(); name != "" {
		var code codes.Code
		if err := code.UnmarshalJSON([]byte(fmt.Sprintf("%q", name))); err != nil {
			return nil, err
		}
		st, err := status.New(code, fmt.Sprintf("%s refused in run %d", item, n)).
			WithDetails(wrapperspb.String("detail of run " + fmt.Sprint(n)))
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	if req.GetFields()[fieldWrong].GetStringValue() != "" {
		return wrapperspb.String("not a Struct"), nil
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"order": structpb.NewNumberValue(float64(n)),
		"item":  structpb.NewStringValue(item),
		"note":  structpb.NewStringValue("\x00é"),
	}}, nil
}

func (s *shop) ship(ctx context.Context, req proto.Message) (proto.Message, error) {
	in := req.ProtoReflect()
	fields := in.Descriptor().Fields()
	item := in.Get(fields.ByName("item")).String()
	if err := s.effect(ctx, shipMethod+" "+item); err != nil {
		return nil, err
	}
	n := s.runs.Add(1)
	out := receiptType.New()
	of := out.Descriptor().Fields()
	out.Set(of.ByName("item"), protoreflect.ValueOfString(item))
	out.Set(of.ByName("number"), protoreflect.ValueOfInt64(n))
	out.Set(of.ByName("label"), in.Get(fields.ByName("label")))
	notes := out.Mutable(of.ByName("notes")).List()
	notes.Append(protoreflect.ValueOfString("fragile"))
	notes.Append(protoreflect.ValueOfString(fmt.Sprintf("weight %d", in.Get(fields.ByName("weight")).Int())))
	return out.Interface(), nil
}

// effect writes an effect row for the call's key, in the call's
// transaction, if it has one: a *sql.Tx (idemgrpc.Tx), or the pgx.Tx of
// idempgx.Runner (idempgx.Tx).
func (s *shop) effect(ctx context.Context, note string) error {
	key := ""
	if vs := metadata.ValueFromIncomingContext(ctx, idemgrpc.DefaultKeyMetadata); len(vs) > 0 {
		key = vs[0]
	}
	if tx := idempgx.Tx(ctx); tx != nil {
		s.sawTx.Store(true)
		_, err := tx.Exec(ctx, s.e.Effects.InsertSQL(), dbtest.EffectKey(key), note)
		return err
	}
	tx := idemgrpc.Tx(ctx)
	s.sawTx.Store(tx != nil)
	if tx == nil {
		return nil
	}
	return s.e.Effects.Insert(ctx, tx, key, note)
}

// unary returns the handler of a unary method of shop, as protoc-gen-go-grpc
// writes it: decode the request, and run the handler through the
// interceptor.
func unary(full string, newReq func() proto.Message, call func(s *shop, ctx context.Context, req proto.Message) (proto.Message, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := newReq()
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			s := srv.(*shop)
			if s.before != nil {
				if err := s.before(ctx, full); err != nil {
					return nil, err
				}
			}
			return call(s, ctx, req.(proto.Message))
		}
		if ic == nil {
			return h(ctx, req)
		}
		return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
	}
}

func newStruct() proto.Message { return new(structpb.Struct) }

var shopDesc = grpc.ServiceDesc{
	ServiceName: shopService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Place", Handler: unary(placeMethod, newStruct, func(s *shop, ctx context.Context, req proto.Message) (proto.Message, error) {
			return s.place(ctx, req.(*structpb.Struct))
		})},
		{MethodName: "Ship", Handler: unary(shipMethod, func() proto.Message { return parcelType.New().Interface() }, (*shop).ship)},
		{MethodName: "Checkout", Handler: unary(checkoutMethod, newStruct, func(s *shop, ctx context.Context, req proto.Message) (proto.Message, error) {
			return s.checkout(ctx, req.(*structpb.Struct))
		})},
		{MethodName: "Peek", Handler: unary(peekMethod, newStruct, func(s *shop, ctx context.Context, req proto.Message) (proto.Message, error) {
			if err := s.effect(ctx, peekMethod); err != nil {
				return nil, err
			}
			return req, nil
		})},
	},
	Metadata: "idemgrpc/test/shop.proto",
}

// ghostMethod is served, but its service is in no registry: a method
// filter that accepts it fails its calls.
const ghostMethod = "/idemgrpc.ghost.Ghost/Boo"

var ghostDesc = grpc.ServiceDesc{
	ServiceName: "idemgrpc.ghost.Ghost",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Boo", Handler: unary(ghostMethod, newStruct, func(_ *shop, _ context.Context, req proto.Message) (proto.Message, error) {
			return req, nil
		})},
	},
	Metadata: "nowhere.proto",
}

// serve starts a gRPC server for s on a loopback port, with the
// interceptor, and returns a client connection to it. Both end with t.
func serve(t *testing.T, s *shop, interceptor grpc.UnaryServerInterceptor, dialOpts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+serveOn(t, s, interceptor),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dialOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serveOn starts a gRPC server for s on a loopback port, with the
// interceptor, and returns its address. It stops at the end of t.
func serveOn(t *testing.T, s *shop, interceptor grpc.UnaryServerInterceptor) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(interceptor))
	srv.RegisterService(&shopDesc, s)
	srv.RegisterService(&ghostDesc, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return lis.Addr().String()
}

// answer is what a client got from one call.
type answer struct {
	reply   proto.Message
	err     error
	header  metadata.MD
	trailer metadata.MD
}

// call invokes method with req, and metadata md (key-value pairs), and
// decodes the reply into a new message of newReply's type. Every call has
// a deadline: 30 s, longer than any wait a test asks for, even on a
// loaded machine, so that a hung call fails its test instead of the run.
func call(conn *grpc.ClientConn, method string, req, reply proto.Message, md ...string) answer {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	var a answer
	a.err = conn.Invoke(ctx, method, req, reply, grpc.Header(&a.header), grpc.Trailer(&a.trailer))
	if a.err == nil {
		a.reply = reply
	}
	return a
}

// place calls Place with item under key (none if key is empty).
func place(conn *grpc.ClientConn, key, item string, extra ...string) answer {
	req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue(item)}}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Fields[extra[i]] = structpb.NewStringValue(extra[i+1])
	}
	var md []string
	if key != "" {
		md = []string{idemgrpc.DefaultKeyMetadata, key}
	}
	return call(conn, placeMethod, req, new(structpb.Struct), md...)
}

// parcel is a request of Ship.
func parcel(item string, weight int64, label []byte) proto.Message {
	m := parcelType.New()
	f := m.Descriptor().Fields()
	m.Set(f.ByName("item"), protoreflect.ValueOfString(item))
	m.Set(f.ByName("weight"), protoreflect.ValueOfInt64(weight))
	m.Set(f.ByName("label"), protoreflect.ValueOfBytes(label))
	return m.Interface()
}

// ship calls Ship with req under key.
func ship(conn *grpc.ClientConn, key string, req proto.Message) answer {
	return call(conn, shipMethod, req, receiptType.New().Interface(), idemgrpc.DefaultKeyMetadata, key)
}
