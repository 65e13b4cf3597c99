package idemgrpc_test

import (
	"context"
	"database/sql"
	"errors"
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

// The service of ExampleRun is shop.Checkout, with one method, spelt out
// as the Orders service of ExampleUnaryServerInterceptor is:
//
//	rpc Pay(google.protobuf.Struct) returns (google.protobuf.Struct);
const checkoutFile = `
name: "shop/checkout.proto"
package: "shop"
syntax: "proto3"
dependency: "google/protobuf/struct.proto"
service {
  name: "Checkout"
  method { name: "Pay" input_type: ".google.protobuf.Struct" output_type: ".google.protobuf.Struct" }
}`

func init() {
	var file descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(checkoutFile), &file); err != nil {
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

// payments stands for a payment provider: it charges once per idempotency
// key, and is down for its first call.
type payments struct {
	charges map[string]string // by idempotency key
	calls   int
}

func (p *payments) charge(callKey string) (string, error) {
	if p.calls++; p.calls == 1 {
		return "", errors.New("provider: 502 Bad Gateway")
	}
	if _, ok := p.charges[callKey]; !ok {
		p.charges[callKey] = fmt.Sprintf("ch_%d", len(p.charges)+1)
	}
	return p.charges[callKey], nil
}

// request names the call whose step runs with ctx, as the Store keeps it
// (idem.IdentityFrom): the stored key, which holds the client's scope, so
// that two clients' calls with one key are two orders.
func request(ctx context.Context) string {
	id, _ := idem.IdentityFrom(ctx)
	return id.Key
}

// checkoutServer serves shop.Checkout.
type checkoutServer struct{ provider *payments }

// Pay charges the card between two phases: the order commits before the
// call to the provider, and the charge after it.
func (s *checkoutServer) Pay(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	item := req.GetFields()["item"].GetStringValue()
	if item == "" {
		return nil, status.Error(codes.InvalidArgument, "no item") // before Run: nothing is stored
	}
	var chargeID string
	return idemgrpc.Run[*structpb.Struct](ctx,
		idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO orders (request, item) VALUES (?, ?)`, request(ctx), item)
			return err
		}),
		idem.Call("charge", func(ctx context.Context, callKey string) (err error) {
			chargeID, err = s.provider.charge(callKey) // callKey is the same on every retry
			return err
		}),
		idem.Final("confirm", func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			var id int64
			if err := tx.QueryRowContext(ctx, `UPDATE orders SET charge = ? WHERE request = ? RETURNING id`, chargeID, request(ctx)).Scan(&id); err != nil {
				return idem.Response{}, err
			}
			return idemgrpc.Reply(ctx, &structpb.Struct{Fields: map[string]*structpb.Value{
				"order":  structpb.NewNumberValue(float64(id)),
				"charge": structpb.NewStringValue(chargeID),
			}})
		}),
	)
}

var checkoutService = grpc.ServiceDesc{
	ServiceName: "shop.Checkout",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Pay",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := new(structpb.Struct)
			if err := dec(req); err != nil {
				return nil, err
			}
			handler := func(ctx context.Context, req any) (any, error) {
				return srv.(*checkoutServer).Pay(ctx, req.(*structpb.Struct))
			}
			if ic == nil {
				return handler(ctx, req)
			}
			return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/shop.Checkout/Pay"}, handler)
		},
	}},
}

func ExampleRun() {
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
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, request TEXT UNIQUE NOT NULL, item TEXT NOT NULL, charge TEXT)`); err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		log.Fatal(err)
	}

	protect, err := idemgrpc.UnaryServerInterceptor(store, db, nil,
		idemgrpc.WithStepMethods("/shop.Checkout/Pay"), // its handler calls idemgrpc.Run
		idemgrpc.WithSingleClient(),                    // one client here; a real service names it with WithScope
	)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(protect))
	provider := &payments{charges: map[string]string{}}
	srv.RegisterService(&checkoutService, &checkoutServer{provider: provider})
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
	pay := func(key, item string) {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", key)
		req, _ := structpb.NewStruct(map[string]any{"item": item})
		reply := new(structpb.Struct)
		var header metadata.MD
		if err := conn.Invoke(ctx, "/shop.Checkout/Pay", req, reply, grpc.Header(&header)); err != nil {
			fmt.Printf("%s: %v %q\n", key, status.Code(err), status.Convert(err).Message())
			return
		}
		f := reply.GetFields()
		fmt.Printf("%s: order %v, charge %s, replayed %q\n", key, f["order"].GetNumberValue(), f["charge"].GetStringValue(), header.Get(idemgrpc.ReplayedMetadata))
	}
	pay("5b0c", "book") // the provider is down: the order stays, unfinished
	pay("5b0c", "book") // the retry resumes after the order, and charges once
	pay("5b0c", "book") // a retry of the finished call: the stored reply
	pay("7d2e", "")     // refused before Run: nothing is stored

	var orders int
	if err := db.QueryRow(`SELECT count(*) FROM orders`).Scan(&orders); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("orders: %d, provider calls: %d, charges: %d\n", orders, provider.calls, len(provider.charges))
	// Prints:
	// 5b0c: Unavailable "the call stopped before it finished, perhaps after some of its steps were done; retry with the same key: it resumes where it stopped, and no step that was done is done again"
	// 5b0c: order 1, charge ch_1, replayed []
	// 5b0c: order 1, charge ch_1, replayed ["true"]
	// 7d2e: InvalidArgument "no item"
	// orders: 1, provider calls: 2, charges: 1
}
