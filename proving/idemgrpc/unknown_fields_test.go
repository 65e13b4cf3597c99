package idemgrpc_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem/idemgrpc"
)

// newerParcelType is Parcel as a newer client knows it, with a field that
// the server's Parcel lacks:
//
//	message Parcel { string item = 1; int64 weight = 2; bytes label = 3; map<string, string> extras = 4; }
//
// It is in a registry of its own, not in protoregistry.GlobalFiles, where
// the server's Parcel is.
var newerParcelType = func() protoreflect.MessageType {
	str := func(s string) *string { return &s }
	field := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, label descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: str(name), JsonName: str(name), Number: proto.Int32(num), Type: typ.Enum(), Label: label.Enum()}
	}
	opt, rep := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	extras := field("extras", 4, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, rep)
	extras.TypeName = str(".idemgrpc.test.Parcel.ExtrasEntry")
	file := &descriptorpb.FileDescriptorProto{
		Name:    str("idemgrpc/test/shop_newer.proto"),
		Package: str("idemgrpc.test"),
		Syntax:  str("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: str("Parcel"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("item", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, opt),
				field("weight", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64, opt),
				field("label", 3, descriptorpb.FieldDescriptorProto_TYPE_BYTES, opt),
				extras,
			},
			NestedType: []*descriptorpb.DescriptorProto{{
				Name: str("ExtrasEntry"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("key", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING, opt),
					field("value", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING, opt),
				},
				Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			}},
		}},
	}
	fd, err := protodesc.NewFile(file, new(protoregistry.Files))
	if err != nil {
		panic(err)
	}
	return dynamicpb.NewMessageType(fd.Messages().ByName("Parcel"))
}()

// newerParcel returns an encoding of the newer Parcel of item, with the
// extras' entries (key, value, key, value...) written in the order given,
// as a client's library may write a map's entries in any order.
func newerParcel(t *testing.T, item string, extras ...string) []byte {
	t.Helper()
	m := newerParcelType.New()
	f := m.Descriptor().Fields()
	m.Set(f.ByName("item"), protoreflect.ValueOfString(item))
	m.Set(f.ByName("weight"), protoreflect.ValueOfInt64(1200))
	b := deterministic(t, m.Interface())
	for i := 0; i+1 < len(extras); i += 2 {
		entry := newerParcelType.New()
		entry.Mutable(f.ByName("extras")).Map().Set(protoreflect.ValueOfString(extras[i]).MapKey(), protoreflect.ValueOfString(extras[i+1]))
		b = append(b, deterministic(t, entry.Interface())...)
	}
	return b
}

// shipEncoded calls Ship under key with req, the request as it goes on
// the wire, and decodes the reply as a Receipt.
func shipEncoded(t *testing.T, conn *grpc.ClientConn, key string, req []byte) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		a   answer
		out []byte
	)
	a.err = conn.Invoke(metadata.AppendToOutgoingContext(ctx, idemgrpc.DefaultKeyMetadata, key), shipMethod, &req, &out,
		grpc.ForceCodec(rawCodec{}), grpc.Header(&a.header), grpc.Trailer(&a.trailer))
	if a.err == nil {
		a.reply = receiptType.New().Interface()
		if err := proto.Unmarshal(out, a.reply); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// TestUnknownFieldsInAnyOrder sends the server requests with fields that
// it does not know, as a client built with a newer definition of the
// message does, under one key: encodings of one message whose unknown
// fields come in another order are one call, and the second gets the
// first one's reply; a value of an unknown field changed, added or left
// out makes another call, refused with KEY_REUSED. It holds for a map
// that Ship's Parcel lacks, whose entries a client writes in any order,
// and for unknown fields of messages within the request's known fields
// (Place's Struct: a Value in a map, a ListValue in it, the Values in the
// list).
func TestUnknownFieldsInAnyOrder(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e := setup(t, tg)
		s, conn := e.start(t, protected)

		sent := newerParcel(t, "kettle", "colour", "red", "gift", "yes", "wrap", "paper")
		first := shipEncoded(t, conn, "k", sent)
		if first.err != nil {
			t.Fatal(first.err)
		}
		for _, again := range [][]byte{
			newerParcel(t, "kettle", "wrap", "paper", "colour", "red", "gift", "yes"),
			newerParcel(t, "kettle", "gift", "yes", "wrap", "paper", "colour", "red"),
		} {
			a, b := newerParcelType.New().Interface(), newerParcelType.New().Interface()
			if bytes.Equal(again, sent) || proto.Unmarshal(sent, a) != nil || proto.Unmarshal(again, b) != nil || !proto.Equal(a, b) {
				t.Fatalf("%x is not another encoding of the message %x", again, sent)
			}
			wantReplay(t, shipEncoded(t, conn, "k", again), first)
		}
		for _, other := range [][]byte{
			newerParcel(t, "kettle", "colour", "red", "gift", "no", "wrap", "paper"),
			newerParcel(t, "kettle", "colour", "red", "gift", "yes", "wrap", "paper", "note", "by noon"),
			newerParcel(t, "kettle", "colour", "red", "wrap", "paper"),
		} {
			wantRefusal(t, shipEncoded(t, conn, "k", other), codes.FailedPrecondition, idemgrpc.ReasonKeyReused)
		}

		// Fields 90 and 91, unknown to google.protobuf.Value, in the
		// Values of a Struct's map and in a list within it.
		f90 := protowire.AppendVarint(protowire.AppendTag(nil, 90, protowire.VarintType), 7)
		f91 := protowire.AppendString(protowire.AppendTag(nil, 91, protowire.BytesType), "gift")
		f91b := protowire.AppendString(protowire.AppendTag(nil, 91, protowire.BytesType), "wrap")
		withUnknown := func(v *structpb.Value, fields ...[]byte) *structpb.Value {
			v.ProtoReflect().SetUnknown(bytes.Join(fields, nil))
			return v
		}
		nested := func(first, second []byte) *structpb.Struct {
			return &structpb.Struct{Fields: map[string]*structpb.Value{
				fieldItem: withUnknown(structpb.NewStringValue("book"), first, second),
				"notes": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
					withUnknown(structpb.NewStringValue("a"), second, first),
					withUnknown(structpb.NewStringValue("b"), first, second),
				}}),
			}}
		}
		placed := call(conn, placeMethod, nested(f90, f91), new(structpb.Struct), idemgrpc.DefaultKeyMetadata, "n")
		wantRan(t, placed, 2)
		wantReplay(t, call(conn, placeMethod, nested(f91, f90), new(structpb.Struct), idemgrpc.DefaultKeyMetadata, "n"), placed)
		wantRefusal(t, call(conn, placeMethod, nested(f90, f91b), new(structpb.Struct), idemgrpc.DefaultKeyMetadata, "n"),
			codes.FailedPrecondition, idemgrpc.ReasonKeyReused)

		if n := s.runs.Load(); n != 2 {
			t.Errorf("the handlers ran %d times, want 2: once for each key", n)
		}
		for _, key := range []string{"k", "n"} {
			if n := e.EffectCount(t, key); n != 1 {
				t.Errorf("%d effect rows for %s, want 1", n, key)
			}
		}
	})
}
