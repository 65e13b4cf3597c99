package idemgrpc_test

import (
	"context"
	"log"
	"net"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/idempgx"
)

// placeOrderOnPgx is placeOrder for a service on a pgx pool: it writes the
// order in the pgx.Tx of the interceptor's Runner, which idempgx.Tx finds
// as it finds the transaction behind idemhttp's middleware.
func placeOrderOnPgx(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	item := req.GetFields()["item"].GetStringValue()
	var id int64
	err := idempgx.Tx(ctx).QueryRow(ctx, `INSERT INTO orders (item) VALUES ($1) RETURNING id`, item).Scan(&id)
	if err != nil {
		return nil, status.Error(codes.Internal, "database error") // nothing is stored: a retry runs again
	}
	return structpb.NewStruct(map[string]any{"id": id, "item": item})
}

// ExampleUnaryServerInterceptorWithRunner serves shop.Orders, as
// ExampleUnaryServerInterceptor does, on a pgx pool: the interceptor runs
// its calls through idempgx.Runner, the Runner that idemhttp's middleware
// takes too, and the handler writes through idempgx.Tx. It needs a
// PostgreSQL server, so it is compiled and not run; the tests run by
// forEachWay (TestClaimThenReplay, TestInFlight, TestMismatch,
// TestClientKeysAndRetryPolicy, TestRunSteps) serve the same way on
// PostgreSQL.
func ExampleUnaryServerInterceptorWithRunner() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := idem.New(idem.Postgres())
	if err != nil {
		log.Fatal(err)
	}
	if err := idempgx.New(store).Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	protect, err := idemgrpc.UnaryServerInterceptorWithRunner(store,
		idempgx.Runner(store, pool, pgx.TxOptions{}), // the transactions' options are pgx's
		idemgrpc.WithMethods("/shop.Orders/Place"),
		idemgrpc.WithKeyRequired(),
		idemgrpc.WithScope(func(ctx context.Context) (string, error) { return "shop-frontend", nil }),
	)
	if err != nil {
		log.Fatal(err) // a bad configuration, a nil pool included, fails here
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(protect))
	orders := ordersServiceOf(placeOrderOnPgx)
	srv.RegisterService(&orders, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(lis))
}
