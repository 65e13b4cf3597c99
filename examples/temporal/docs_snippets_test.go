package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgo/idem/internal/docsnippets"
)

// TestDocsSnippetsCompile type-checks the Go blocks of docs/workflows.md in
// this module, which has Temporal's SDK among its dependencies where the
// root module has not; the root's TestDocsSnippetsCompile leaves that
// document to this one. How a fragment is wrapped, and which errors are
// ignored, is said in package docsnippets; a block fenced as "```go
// fragment" is skipped.
//
// The prelude declares what the snippets take as given: ctx, db and store,
// the activity's input type Charge and its helper insertPayment, and
// ActivityKey, which the document shows but a snippet cannot import from
// this package main.
//
// The SDK's packages are stubs, sdkStubs, with the names that the snippets
// use: type-checking the SDK from its source, with gRPC and Temporal's API
// beneath it, takes a minute. The blank list below sdkStubs ties each
// stub's names to the SDK: this file does not compile when one of them
// changes there.
func TestDocsSnippetsCompile(t *testing.T) {
	imports := maps.Clone(docsnippets.Imports)
	imports["activity"] = "go.temporal.io/sdk/activity"
	imports["temporal"] = "go.temporal.io/sdk/temporal"
	imports["workflow"] = "go.temporal.io/sdk/workflow"
	c := &docsnippets.Checker{Dir: ".", Prelude: temporalPrelude, Imports: imports, Stubs: sdkStubs}
	name := filepath.Join("..", "..", "docs", "workflows.md")
	md, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range docsnippets.Extract(name, md) {
		n++
		if err := c.Check(b); err != nil {
			t.Errorf("the block at %s:%d does not compile:\n%v", b.File, b.Line, err)
		}
	}
	if n < 3 {
		t.Errorf("found %d Go blocks to check in %s, want its snippets", n, name)
	}
}

const temporalPrelude = `package snippet

import (
	"context"
	"database/sql"

	"go.temporal.io/sdk/activity"

	"github.com/idemgo/idem"
)

var (
	ctx   context.Context
	db    *sql.DB
	store *idem.Store
)

type Charge struct {
	OrderID     string
	AmountCents int64
}

func insertPayment(ctx context.Context, tx *sql.Tx, c Charge) (int64, error) { return 0, nil }

func ActivityKey(info activity.Info) string { return "" }
`

// sdkStubs are the SDK's packages as the snippets see them.
var sdkStubs = map[string]string{
	"go.temporal.io/sdk/activity": `package activity

import "context"

type Execution struct{ ID, RunID string }

type Info struct {
	Namespace string
	WorkflowExecution Execution
	ActivityID        string
	Attempt           int32
}

func GetInfo(ctx context.Context) Info { return Info{} }
`,
	"go.temporal.io/sdk/temporal": `package temporal

func NewNonRetryableApplicationError(message, errType string, cause error, details ...interface{}) error {
	return nil
}
`,
	"go.temporal.io/sdk/workflow": `package workflow

import "time"

type ActivityOptions struct {
	ScheduleToCloseTimeout time.Duration
	StartToCloseTimeout    time.Duration
	HeartbeatTimeout       time.Duration
}
`,
}

// The stubs' names in the SDK itself, with their types.
var _ = []any{
	activity.Info{
		Namespace:         "",
		WorkflowExecution: workflow.Execution{ID: "", RunID: ""},
		ActivityID:        "",
		Attempt:           int32(0),
	},
	func(ctx context.Context) activity.Info { return activity.GetInfo(ctx) },
	func(message, errType string, cause error, details ...interface{}) error {
		return temporal.NewNonRetryableApplicationError(message, errType, cause, details...)
	},
	workflow.ActivityOptions{
		ScheduleToCloseTimeout: time.Duration(0),
		StartToCloseTimeout:    time.Duration(0),
		HeartbeatTimeout:       time.Duration(0),
	},
}
