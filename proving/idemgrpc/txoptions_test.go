package idemgrpc_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestTxOptions shows that every transaction the interceptor begins for a
// protected call gets the options given to UnaryServerInterceptor, as the
// driver sees them and, on PostgreSQL, as the server does; that nil leaves
// them to the database; and that the interceptor keeps a copy, so that
// changing the caller's struct afterwards changes nothing.
func TestTxOptions(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		began := dbtest.RecordBegins(&tg)
		e := setup(t, tg)
		s := &shop{e: e}
		level := sql.LevelSerializable
		// On PostgreSQL the handler asks the server at which level its
		// transaction runs, and what the session's default is.
		var got, def string
		handler := func(ctx context.Context, req any) (any, error) {
			if tx := idemgrpc.Tx(ctx); tx != nil && tg.Family == "postgres" {
				err := tx.QueryRowContext(ctx, "SELECT current_setting('transaction_isolation'), current_setting('default_transaction_isolation')").Scan(&got, &def)
				if err != nil {
					return nil, err
				}
			}
			return s.place(ctx, req.(*structpb.Struct))
		}
		info := &grpc.UnaryServerInfo{Server: s, FullMethod: placeMethod}
		req := &structpb.Struct{Fields: map[string]*structpb.Value{fieldItem: structpb.NewStringValue("book")}}
		for i, c := range []struct {
			name   string
			opts   *sql.TxOptions
			want   sql.IsolationLevel
			server string // on PostgreSQL; "" is the session's default
		}{
			{"nil", nil, sql.LevelDefault, ""},
			{level.String(), &sql.TxOptions{Isolation: level}, level, strings.ToLower(level.String())},
		} {
			t.Run(c.name, func(t *testing.T) {
				ic, err := idemgrpc.UnaryServerInterceptor(e.Store, e.DB, c.opts, protected, idemgrpc.WithSingleClient())
				if err != nil {
					t.Fatal(err)
				}
				if c.opts != nil {
					c.opts.Isolation = sql.LevelReadUncommitted // the interceptor's copy must not see it
				}
				began.Take()
				got, def = "", ""
				ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(idemgrpc.DefaultKeyMetadata, fmt.Sprintf("k%d", i)))
				if _, err := ic(ctx, req, info, handler); err != nil {
					t.Fatal(err)
				}
				began.WantIsolation(t, "the call", c.want)
				if tg.Family == "postgres" {
					want := c.server
					if want == "" {
						want = def
					}
					if got != want {
						t.Errorf("the handler's transaction ran at %q, want %q", got, want)
					}
				}
			})
		}
	})
}
