package idemgrpc_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

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

// The service of the example is shop.Orders, with one method:
//
//	rpc Place(google.protobuf.Struct) returns (google.protobuf.Struct);
//
// protoc-gen-go would register its descriptor, and protoc-gen-go-grpc
// would write its grpc.ServiceDesc; both are spelt out here, so that the
// example needs no generated code.
const ordersFile = `
name: "shop/orders.proto"
package: "shop"
syntax: "proto3"
dependency: "google/protobuf/struct.proto"
service {
  name: "Orders"
  method { name: "Place" input_type: ".google.protobuf.Struct" output_type: ".google.protobuf.Struct" }
}`

func init() {
	var file descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(ordersFile), &file); err != nil {
		log.Fatal(err)
	}
	fd, err := protodesc.NewFile(&file, protoregistry.GlobalFiles)
	if err != nil {
		log.Fatal(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		log.Fatal(err)
	}
}

var ordersService = ordersServiceOf(placeOrder)

// ordersServiceOf is the grpc.ServiceDesc of shop.Orders whose Place is
// place.
func ordersServiceOf(place func(context.Context, *structpb.Struct) (*structpb.Struct, error)) grpc.ServiceDesc {
	return grpc.ServiceDesc{
		ServiceName: "shop.Orders",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Place",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				req := new(structpb.Struct)
				if err := dec(req); err != nil {
					return nil, err
				}
				handler := func(ctx context.Context, req any) (any, error) { return place(ctx, req.(*structpb.Struct)) }
				if ic == nil {
					return handler(ctx, req)
				}
				return ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/shop.Orders/Place"}, handler)
			},
		}},
	}
}

// placeOrder writes the order in the interceptor's transaction, with the
// key.
func placeOrder(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	item := req.GetFields()["item"].GetStringValue()
	var id int64
	err := idemgrpc.Tx(ctx).QueryRowContext(ctx, `INSERT INTO orders (item) VALUES (?) RETURNING id`, item).Scan(&id)
	if err != nil {
		return nil, status.Error(codes.Internal, "database error") // nothing is stored: a retry runs again
	}
	return structpb.NewStruct(map[string]any{"id": id, "item": item})
}

func ExampleUnaryServerInterceptor() {
	dir, err := os.MkdirTemp("", "idemgrpc-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_txlock=immediate&_pragma=busy_timeout(5000)") // modernc.org/sqlite
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}

	protect, err := idemgrpc.UnaryServerInterceptor(store, db, nil, // nil: the database's transaction options
		idemgrpc.WithMethods("/shop.Orders/Place"),
		idemgrpc.WithKeyRequired(),
		// One shop, one client here; a real service names the client
		// that its authentication found.
		idemgrpc.WithScope(func(ctx context.Context) (string, error) { return "shop-frontend", nil }),
	)
	if err != nil {
		log.Fatal(err) // a bad configuration fails here, before serving
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(protect))
	srv.RegisterService(&ordersService, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	place := func(key, item string) {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", key)
		req, _ := structpb.NewStruct(map[string]any{"item": item})
		reply := new(structpb.Struct)
		var header metadata.MD
		if err := conn.Invoke(ctx, "/shop.Orders/Place", req, reply, grpc.Header(&header)); err != nil {
			fmt.Printf("%s %s: %v\n", key, item, status.Code(err))
			return
		}
		fmt.Printf("%s %s: order %v, replayed %q\n", key, item, reply.GetFields()["id"].GetNumberValue(), header.Get(idemgrpc.ReplayedMetadata))
	}
	place("order-1", "book")
	place("order-1", "book")   // a retry: the first reply, and no second order
	place("order-1", "kettle") // another order under the same key
	place("order-2", "kettle")

	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", n)
	// Prints:
	// order-1 book: order 1, replayed []
	// order-1 book: order 1, replayed ["true"]
	// order-1 kettle: FailedPrecondition
	// order-2 kettle: order 2, replayed []
	// orders: 2
}
