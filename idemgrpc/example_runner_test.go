package idemgrpc_test

import (
	"context"
	"database/sql"
	"log"
	"net"

	"google.golang.org/grpc"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
)

// ExampleUnaryServerInterceptorWithRunner serves shop.Orders through a
// Runner, the seam between the interceptor and a driver: here database/sql's,
// idem.SQLRunner, which UnaryServerInterceptor makes for itself. On a pgx
// pool the Runner is idempgx.Runner(store, pool, pgx.TxOptions{}), and the
// handler finds its pgx.Tx with idempgx.Tx(ctx), as docs/grpc.md shows. It
// serves until the process ends, so it is compiled and not run.
func ExampleUnaryServerInterceptorWithRunner() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:shop.db?_txlock=immediate&_pragma=busy_timeout(5000)") // modernc.org/sqlite
	if err != nil {
		log.Fatal(err)
	}
	store, err := idem.New(idem.SQLite())
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	protect, err := idemgrpc.UnaryServerInterceptorWithRunner(store, idem.SQLRunner(store, db, nil),
		idemgrpc.WithMethods("/shop.Orders/Place"),
		idemgrpc.WithKeyRequired(),
	)
	if err != nil {
		log.Fatal(err) // a bad configuration, a nil database included, fails here
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(protect))
	orders := ordersService
	srv.RegisterService(&orders, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(lis))
}
