package idemgrpc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/proving/checkout"
	"github.com/idemgo/idem/proving/dbtest"
)

// customerMetadata names the customer of a call in the shard tests, as a
// service's authentication would.
const customerMetadata = "x-customer"

// byCustomer is the interceptor that a service chains in front of
// idemgrpc's when its store has a shard column: it reads the customer
// from the call's metadata and puts it in the call's context with
// idem.WithShard, where the Store reads it. A call without the metadata
// goes on without a shard value, which is the set-up mistake the tests
// show refused.
func byCustomer(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	vs := metadata.ValueFromIncomingContext(ctx, customerMetadata)
	if len(vs) == 0 {
		return handler(ctx, req)
	}
	id, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "bad customer")
	}
	return handler(idem.WithShard(ctx, id), req)
}

// customerOf is the customer that byCustomer put in ctx.
func customerOf(ctx context.Context) (int64, error) {
	v, ok := idem.ShardFrom(ctx)
	id, isInt := v.(int64)
	if !ok || !isInt {
		return 0, fmt.Errorf("no customer in the context (shard value %v)", v)
	}
	return id, nil
}

// orderShop serves Place and Checkout of idemgrpc.test.Shop for the shard
// tests: each places the customer's order under the call's key, Place in
// the call's transaction and Checkout in a Phase of a multi-step call,
// and answers with the number of the run and the customer.
type orderShop struct {
	orders *dbtest.Orders
	runs   atomic.Int64
	// provider, when set, is the URL of a payment provider: Checkout is
	// then the customer's checkout (checkout.ForCustomer), which charges
	// there, and answers with the charge.
	provider string
}

// answerOf is the reply of run n for customer.
func answerOf(n, customer int64) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"order":    structpb.NewNumberValue(float64(n)),
		"customer": structpb.NewNumberValue(float64(customer)),
	}}
}

func callKey(ctx context.Context) string {
	if vs := metadata.ValueFromIncomingContext(ctx, idemgrpc.DefaultKeyMetadata); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func (s *orderShop) place(ctx context.Context) (proto.Message, error) {
	customer, err := customerOf(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.orders.Insert(ctx, idemgrpc.Tx(ctx), customer, callKey(ctx)); err != nil {
		return nil, err
	}
	n := s.runs.Add(1)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-run", fmt.Sprint(n)))
	return answerOf(n, customer), nil
}

func (s *orderShop) checkout(ctx context.Context) (proto.Message, error) {
	key := callKey(ctx)
	if s.provider != "" {
		customer, err := customerOf(ctx)
		if err != nil {
			return nil, err
		}
		return idemgrpc.Run[*structpb.Struct](ctx, checkout.ForCustomer[*sql.Tx]{
			Ops: checkout.SQLOps, Orders: s.orders, URL: s.provider, Customer: customer, Key: key,
			Answer: func(ctx context.Context, id string) (idem.Response, error) {
				return idemgrpc.Reply(ctx, &structpb.Struct{Fields: map[string]*structpb.Value{"charge": structpb.NewStringValue(id)}})
			},
		}.Steps()...)
	}
	return idemgrpc.Run[*structpb.Struct](ctx,
		idem.Phase("order", func(ctx context.Context, tx *sql.Tx) error {
			customer, err := customerOf(ctx)
			if err != nil {
				return err
			}
			return s.orders.Insert(ctx, tx, customer, key)
		}),
		idem.Final("answer", func(ctx context.Context, _ *sql.Tx) (idem.Response, error) {
			customer, err := customerOf(ctx)
			if err != nil {
				return idem.Response{}, err
			}
			return idemgrpc.Reply(ctx, answerOf(s.runs.Add(1), customer))
		}))
}

// orderUnary is the handler of a unary method of orderShop, as
// protoc-gen-go-grpc writes it.
func orderUnary(full string, call func(s *orderShop, ctx context.Context) (proto.Message, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := new(structpb.Struct)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, _ any) (any, error) { return call(srv.(*orderShop), ctx) }
		return ic(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
	}
}

var orderShopDesc = grpc.ServiceDesc{
	ServiceName: shopService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Place", Handler: orderUnary(placeMethod, (*orderShop).place)},
		{MethodName: "Checkout", Handler: orderUnary(checkoutMethod, (*orderShop).checkout)},
	},
	Metadata: "idemgrpc/test/shop.proto",
}

// serveByCustomer serves s with byCustomer chained in front of idemgrpc's
// interceptor on e's store, with opts, and returns a client connection.
// Both end with t.
func serveByCustomer(t *testing.T, e *dbtest.Env, s *orderShop, opts ...idemgrpc.Option) *grpc.ClientConn {
	t.Helper()
	ic, err := idemgrpc.UnaryServerInterceptor(e.Store, e.DB, nil, append(opts, idemgrpc.WithSingleClient())...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(byCustomer, ic))
	srv.RegisterService(&orderShopDesc, s)
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

// callAs calls method under key as customer ("" for no customer).
func callAs(conn *grpc.ClientConn, method, customer, key string) answer {
	md := []string{idemgrpc.DefaultKeyMetadata, key}
	if customer != "" {
		md = append(md, customerMetadata, customer)
	}
	return call(conn, method, &structpb.Struct{}, new(structpb.Struct), md...)
}

// wantOrder fails the test unless a is the reply of run n for customer,
// not a replay.
func wantOrder(t *testing.T, a answer, n, customer int64) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("call failed: %v; want order %d of customer %d", a.err, n, customer)
	}
	if !proto.Equal(a.reply, answerOf(n, customer)) || len(a.header.Get(idemgrpc.ReplayedMetadata)) != 0 {
		t.Errorf("got %v, %s %q; want order %d of customer %d, not replayed", a.reply, idemgrpc.ReplayedMetadata, a.header.Get(idemgrpc.ReplayedMetadata), n, customer)
	}
}

// wantRows fails the test unless table holds n rows, of every customer:
// idem's records or the orders.
func wantRows(t *testing.T, db *sql.DB, table string, n int) {
	t.Helper()
	var got int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("%s holds %d rows, want %d", table, got, n)
	}
}

// shardCalls makes the calls of the shard tests to method: two
// customers' calls with one key each place an order, a retry of the first
// replays it, and a call without a customer is refused with Internal
// (INTERNAL), ErrInvalidArgument reported to the hook, and nothing run or
// stored.
func shardCalls(t *testing.T, e *dbtest.Env, orders *dbtest.Orders, s *orderShop, h *hook, conn *grpc.ClientConn, method string) {
	t.Helper()
	first := callAs(conn, method, "7", "k1")
	wantOrder(t, first, 1, 7)
	wantOrder(t, callAs(conn, method, "8", "k1"), 2, 8)
	again := callAs(conn, method, "7", "k1")
	if again.err != nil || !proto.Equal(again.reply, first.reply) {
		t.Errorf("customer 7's retry: %v, %v; want the replay of %v", again.reply, again.err, first.reply)
	}
	wantMarked(t, again)
	for _, c := range []int64{7, 8} {
		if n := orders.Count(t, c, "k1"); n != 1 {
			t.Errorf("customer %d has %d orders k1, want 1", c, n)
		}
	}

	wantRefusal(t, callAs(conn, method, "", "k2"), codes.Internal, idemgrpc.ReasonInternal)
	if errs := h.reported(); len(errs) != 1 || !errors.Is(errs[0], idem.ErrInvalidArgument) {
		t.Errorf("hook got %v, want one error matching idem.ErrInvalidArgument", errs)
	}
	if n := s.runs.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2: it must not run without a shard value", n)
	}
	wantRows(t, e.DB, e.Table, 2)
	wantRows(t, e.DB, orders.Table, 2)
}

// TestShardFromInterceptor shows the shard value reaching the Store
// through the interceptor's DoTx, on every database: an interceptor
// chained in front of idemgrpc's sets it from the call's x-customer
// metadata, two customers' calls with one key each run and place an order
// of their own, a retry of one replays, and a call that reaches idemgrpc
// without a shard value gets Internal (INTERNAL), with ErrInvalidArgument
// reported to the error hook, the handler not run and nothing stored.
func TestShardFromInterceptor(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		e, orders := tg.SetupByCustomer(t)
		s := &orderShop{orders: orders}
		var h hook
		conn := serveByCustomer(t, e, s, idemgrpc.WithMethods(placeMethod), h.option())
		shardCalls(t, e, orders, s, &h, conn, placeMethod)
	})
}

// TestShardFromInterceptorSteps is TestShardFromInterceptor for a method
// of WithStepMethods, whose handler calls idemgrpc.Run: the shard value
// reaches Store.Run and the steps' context.
func TestShardFromInterceptorSteps(t *testing.T) {
	forEachRunTarget(t, func(t *testing.T, tg target) {
		e, orders := tg.SetupByCustomer(t)
		s := &orderShop{orders: orders}
		var h hook
		conn := serveByCustomer(t, e, s, idemgrpc.WithStepMethods(checkoutMethod), h.option())
		shardCalls(t, e, orders, s, &h, conn, checkoutMethod)
	})
}
