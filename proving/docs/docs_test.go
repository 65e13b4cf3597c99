package docs_test

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgo/idem/internal/docsnippets"
)

// TestDocsSnippetsCompile type-checks every Go block of README.md and of
// docs/*.md but docs/grpc.md and the blocks fenced as "```go grpc", whose
// gRPC snippets are checked in the module idemgrpc
// (TestDocsSnippetsCompile there), and docs/workflows.md, whose Temporal
// snippets are checked in the module examples/temporal (likewise): a
// snippet that no longer
// compiles against the API fails here with its document and line. A block
// fenced as "```go fragment" is a deliberate excerpt and is skipped; how a
// fragment is wrapped, and which errors are ignored, is said in package
// docsnippets.
//
// The prelude, snippetPrelude, declares what every snippet may take as
// given: the usual values of a service (ctx, db, tx, store, pool, mw, key,
// hash, reqHash, body), an HTTP request, its recorder and a mux (r, req,
// rec, mux), a sqlmock (mock), and the handler createOrder with accountOf.
// docPreludes add the running examples of single documents: the payment
// provider of README.md, the NATS
// message of docs/consumers.md, the example dialect's type sqliteMattn and
// its helpers in docs/dialects.md, the pgx Store and its values in
// docs/pgx.md, the order and its helpers in docs/phases.md. The import
// table adds the example dialect's package and the uuid package, which the
// module has among its dependencies.
func TestDocsSnippetsCompile(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(root, "README.md")}
	for _, d := range docs {
		if base := filepath.Base(d); base != "grpc.md" && base != "workflows.md" {
			files = append(files, d)
		}
	}
	imports := maps.Clone(docsnippets.Imports)
	imports["mattnsqlite"] = "github.com/idemgo/idem/examples/mattnsqlite"
	imports["uuid"] = "github.com/google/uuid"
	c := &docsnippets.Checker{Dir: ".", Prelude: snippetPrelude, DocPreludes: docPreludes, Imports: imports}
	n := 0
	for _, name := range files {
		md, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, name) // as docPreludes name it
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range docsnippets.Extract(filepath.ToSlash(rel), md) {
			if b.GRPC {
				continue // checked in the module idemgrpc
			}
			n++
			if err := c.Check(b); err != nil {
				t.Errorf("the block at %s:%d does not compile:\n%v", b.File, b.Line, err)
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d Go blocks in %v, want the docs' snippets", n, files)
	}
}

// snippetPrelude is the file of declarations that every fragment of the
// root's docs is checked with.
const snippetPrelude = `package snippet

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

var (
	ctx     context.Context
	db      *sql.DB
	tx      *sql.Tx
	store   *idem.Store
	pool    *pgxpool.Pool
	mw      *idemhttp.Middleware
	key     string
	hash    []byte
	reqHash []byte
	body    []byte
	r       *http.Request
	req     *http.Request
	rec     *httptest.ResponseRecorder
	mux     *http.ServeMux
	mock    sqlmock.Sqlmock
)

func accountOf(r *http.Request) (string, error)        { return "", nil }
func createOrder(w http.ResponseWriter, r *http.Request) {}

var _ = time.Second
`

// docPreludes are the names of the running examples of single documents.
var docPreludes = map[string]string{
	"README.md": `package snippet

import "context"

// payments is the payment provider of the README's multi-step request.
var payments interface {
	Charge(ctx context.Context, key string, cents int64) error
}
`,
	filepath.Join("docs", "consumers.md"): `package snippet

import (
	"context"
	"database/sql"
)

// msg is a NATS message, as nats.go's *nats.Msg.
var msg interface {
	Headers() interface{ Get(string) string }
	Subject() string
	Data() []byte
}

func insertOrder(ctx context.Context, tx *sql.Tx, payload []byte) error { return nil }
`,
	filepath.Join("docs", "dialects.md"): `package snippet

import (
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemtest"
)

// sqliteMattn is the example dialect, whose methods the fragments declare
// one at a time.
type sqliteMattn struct{}

func quote(table string) string { return dialect.QuoteTable(table, '"') }

const record = "request_hash, status, header, body, checksum, created_at, expires_at, token"

var m *idemtest.Mock
`,
	filepath.Join("docs", "http.md"): `package snippet

import (
	"net/http"

	"github.com/idemgo/idem/idemhttp"
)

var scope string

func withoutSentAt(contentType string, body []byte) ([]byte, error)      { return body, nil }
func writeAPIError(w http.ResponseWriter, r *http.Request, p idemhttp.Problem) {}
`,
	filepath.Join("docs", "pgx.md"): `package snippet

import (
	"context"

	"github.com/idemgo/idem/idempgx"
)

var (
	pg    *idempgx.Store
	to    string
	cents int64
	item  string
)

func charge(ctx context.Context, callKey string) error { return nil }
`,
	filepath.Join("docs", "phases.md"): `package snippet

import (
	"context"
	"database/sql"

	"github.com/idemgo/idem"
)

// Order is the request of the phases' example.
type Order struct {
	ID     int64
	Amount int64
	Email  string
}

var order Order

var (
	provider interface {
		Charge(ctx context.Context, key string, cents int64) (string, error)
	}
	mailer interface {
		Send(ctx context.Context, key, to, text string) error
	}
)

func insertOrder(ctx context.Context, tx *sql.Tx, o any) error                   { return nil }
func storeCharge(ctx context.Context, tx *sql.Tx, order int64, id string) error { return nil }
func loadOrder(ctx context.Context, db *sql.DB, key string) (Order, error) { return Order{}, nil }
func orderSteps(o Order) []idem.Step                                        { return nil }
func cancelOrder(ctx context.Context, tx *sql.Tx, key string, cause error) (idem.Response, error) {
	return idem.Response{}, nil
}
func confirmation(ctx context.Context, tx *sql.Tx, order int64) (idem.Response, error) {
	return idem.Response{}, nil
}
`,
}
