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
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
)

func ExampleUnaryClientInterceptor() {
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
	protect, err := idemgrpc.UnaryServerInterceptor(store, db, nil,
		idemgrpc.WithMethods("/shop.Orders/Place"), idemgrpc.WithKeyRequired(), idemgrpc.WithSingleClient())
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(protect))
	srv.RegisterService(&ordersService, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	// The client gives every call of Place a key of its own, which each
	// attempt of its retry policy sends again.
	keys, err := idemgrpc.UnaryClientInterceptor(idemgrpc.WithClientMethods("/shop.Orders/Place"))
	if err != nil {
		log.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(keys),
		grpc.WithDefaultServiceConfig(`{"methodConfig": [{"name": [{"service": "shop.Orders"}],
			"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
				"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for _, item := range []string{"book", "kettle"} {
		req, _ := structpb.NewStruct(map[string]any{"item": item})
		reply := new(structpb.Struct)
		if err := conn.Invoke(context.Background(), "/shop.Orders/Place", req, reply); err != nil {
			log.Fatal(err) // without a key, WithKeyRequired would refuse the call
		}
		fmt.Println("order", reply.GetFields()["id"].GetNumberValue(), reply.GetFields()["item"].GetStringValue())
	}
	// Prints:
	// order 1 book
	// order 2 kettle
}
