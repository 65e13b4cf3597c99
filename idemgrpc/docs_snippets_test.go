package idemgrpc_test

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgo/idem/internal/docsnippets"
)

// TestDocsSnippetsCompile type-checks the Go blocks of docs/grpc.md in this
// module, which has grpc-go among its dependencies where the root module
// has not; the root's TestDocsSnippetsCompile checks the other documents.
// How a fragment is wrapped, and which errors are ignored, is said in
// package docsnippets; a block fenced as "```go fragment" is skipped.
//
// The prelude declares what the snippets take as given: ctx, db, a
// service's type orders and its helper insertOrder, an authenticating
// interceptor authenticate, accountOf, and a client's target and creds.
// The service's generated package, shopv1, is a stub with the names the
// snippets use.
func TestDocsSnippetsCompile(t *testing.T) {
	name := filepath.Join("..", "docs", "grpc.md")
	md, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	imports := maps.Clone(docsnippets.Imports)
	imports["shopv1"] = shopv1Path
	c := &docsnippets.Checker{
		Dir:     ".",
		Prelude: grpcPrelude,
		Imports: imports,
		Stubs:   map[string]string{shopv1Path: shopv1Stub},
	}
	blocks := docsnippets.Extract(name, md)
	if len(blocks) < 2 {
		t.Fatalf("found %d Go blocks in %s, want its snippets", len(blocks), name)
	}
	for _, b := range blocks {
		if err := c.Check(b); err != nil {
			t.Errorf("the block at %s:%d does not compile:\n%v", b.File, b.Line, err)
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
)

type PlaceRequest struct{ Item string }

type Order struct{ Id string }

type OrdersServer interface {
	Place(context.Context, *PlaceRequest) (*Order, error)
}

func RegisterOrdersServer(s grpc.ServiceRegistrar, srv OrdersServer) {}
`

const grpcPrelude = `package snippet

import (
	"context"
	"database/sql"

	"google.golang.org/grpc"

	shopv1 "example/shop/v1"
)

var (
	ctx    context.Context
	db     *sql.DB
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
`
