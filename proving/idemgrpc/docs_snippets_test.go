package idemgrpc_test

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgo/idem/internal/docsnippets"
)

// TestDocsSnippetsCompile type-checks the Go blocks of docs/grpc.md, and
// those of docs/phases.md fenced as "```go grpc", in this module, which has
// grpc-go among its dependencies where the root module has not; the root's
// TestDocsSnippetsCompile checks the other blocks. How a fragment is
// wrapped, and which errors are ignored, is said in package docsnippets; a
// block fenced as "```go fragment" is skipped.
//
// The prelude declares what the snippets take as given: ctx, db, pool (a pgx
// pool), store, a service's type orders and its helpers insertOrder and
// checkoutSteps, an authenticating interceptor authenticate, accountOf, and
// a client's target and creds. The service's generated package, shopv1, is a
// stub with the names the snippets use.
func TestDocsSnippetsCompile(t *testing.T) {
	imports := maps.Clone(docsnippets.Imports)
	imports["shopv1"] = shopv1Path
	imports["status"] = "google.golang.org/grpc/status"
	imports["codes"] = "google.golang.org/grpc/codes"
	imports["metadata"] = "google.golang.org/grpc/metadata"
	c := &docsnippets.Checker{
		Dir:     ".",
		Prelude: grpcPrelude,
		Imports: imports,
		Stubs:   map[string]string{shopv1Path: shopv1Stub},
	}
	for _, doc := range []struct {
		name string
		all  bool // every block, not only the gRPC ones
		min  int
	}{{"grpc.md", true, 3}, {"phases.md", false, 1}} {
		name := filepath.Join("..", "..", "docs", doc.name)
		md, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, b := range docsnippets.Extract(name, md) {
			if !doc.all && !b.GRPC {
				continue
			}
			n++
			if err := c.Check(b); err != nil {
				t.Errorf("the block at %s:%d does not compile:\n%v", b.File, b.Line, err)
			}
		}
		if n < doc.min {
			t.Errorf("found %d Go blocks to check in %s, want its snippets", n, name)
		}
	}
}

// shopv1Path is the import path of the stub of the example service's
// generated code.
const shopv1Path = "example/shop/v1"

const shopv1Stub = `package shopv1

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
)

type PlaceRequest struct{ Item string }

type Order struct{ Id string }

type CheckoutRequest struct{ Item string }

// Receipt stands for a generated message, which is a proto.Message.
type Receipt struct{ Charge string }

func (*Receipt) ProtoReflect() protoreflect.Message { return nil }

type OrdersServer interface {
	Place(context.Context, *PlaceRequest) (*Order, error)
}

func RegisterOrdersServer(s grpc.ServiceRegistrar, srv OrdersServer) {}
`

const grpcPrelude = `package snippet

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	"github.com/idemgo/idem"
	shopv1 "example/shop/v1"
)

var (
	ctx    context.Context
	db     *sql.DB
	pool   *pgxpool.Pool
	store  *idem.Store
	target string
	creds  grpc.DialOption
)

type orders struct{}

func insertOrder(ctx context.Context, tx *sql.Tx, req *shopv1.PlaceRequest) (string, error) {
	return "", nil
}

func authenticate(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	return next(ctx, req)
}

func accountOf(ctx context.Context) (string, error) { return "", nil }

func checkoutSteps(req *shopv1.CheckoutRequest) []idem.Step { return nil }
`
