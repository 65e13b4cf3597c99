package docsnippets

import (
	"strings"
	"testing"
)

const sample = "# Title\n" + // line 1
	"\n" +
	"```go\n" + // line 3
	"res, err := store.Do(ctx, tx, key, hash, fn)\n" + // line 4
	"```\n" +
	"\n" +
	"```go fragment\n" + // line 7
	"Claim: `INSERT ...`,\n" +
	"```\n" +
	"\n" +
	"```sh\n" + // line 11
	"go test ./...\n" +
	"```\n" +
	"\n" +
	"````go\n" + // line 15
	"// A whole file.\n" +
	"package mine\n" +
	"```\n" + // a shorter fence inside the block is text
	"````\n" +
	"\n" +
	"```go grpc\n" + // line 21
	"srv := grpc.NewServer()\n" +
	"```\n"

// TestSnippetExtractBlocks shows the blocks found with their kinds and the lines
// of their code.
func TestSnippetExtractBlocks(t *testing.T) {
	blocks := Extract("sample.md", []byte(sample))
	if len(blocks) != 4 {
		t.Fatalf("got %d blocks, want 4: %+v", len(blocks), blocks)
	}
	want := []struct {
		line                     int
		fragment, grpc, complete bool
	}{{4, false, false, false}, {8, true, false, false}, {16, false, false, true}, {22, false, true, false}}
	for i, w := range want {
		b := blocks[i]
		if b.File != "sample.md" || b.Line != w.line || b.Fragment != w.fragment || b.GRPC != w.grpc || b.Complete() != w.complete {
			t.Errorf("block %d: %+v (complete %v), want line %d, fragment %v, grpc %v, complete %v",
				i, b, b.Complete(), w.line, w.fragment, w.grpc, w.complete)
		}
	}
	if !strings.Contains(blocks[2].Code, "```\n") {
		t.Errorf("the inner fence ended the block: %q", blocks[2].Code)
	}
}

// TestSnippetWrapSplitsDeclarations shows a fragment's declarations kept at file
// level and its statements in a function, with the imports of the names it
// uses and not of a selector's right side.
func TestSnippetWrapSplitsDeclarations(t *testing.T) {
	b := Block{File: "doc.md", Line: 10, Code: "mux.Handle(\"/\", http.HandlerFunc(h))\n\nfunc h(w http.ResponseWriter, r *http.Request) {\n\t_ = r.Context()\n}\nx := strings.ToUpper(\"a\")\n"}
	got := Wrap(b, Imports)
	for _, want := range []string{
		"import (\n\thttp \"net/http\"\n\tstrings \"strings\"\n)\n",
		"/*line doc.md:12:1*/func h(w http.ResponseWriter",
		"func _() error {\n/*line doc.md:10:1*/mux.Handle",
		"/*line doc.md:15:1*/x := strings.ToUpper",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Wrap lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"context"`) {
		t.Errorf("Wrap imports context for r.Context:\n%s", got)
	}
}

// TestSnippetWrapKeepsRawStrings shows a raw string's lines at column 0 kept
// with the line that opened it, and an import line of the snippet kept
// before its declarations.
func TestSnippetWrapKeepsRawStrings(t *testing.T) {
	b := Block{File: "doc.md", Line: 1, Code: "import \"strings\"\n\nfunc q() string {\n\treturn strings.TrimSpace(`\nfunc in a string\n`)\n}\ns := `\nvar in a string\n`\n"}
	c := &Checker{Dir: "."}
	if err := c.Check(b); err != nil {
		t.Errorf("the block does not compile: %v\n%s", err, Wrap(b, Imports))
	}
	if got := Wrap(b, Imports); !strings.HasPrefix(got, "package snippet\n\n/*line doc.md:1:1*/import \"strings\"\n") {
		t.Errorf("the snippet's import is not first:\n%s", got)
	}
}

// TestSnippetCheckPreludeGivesWay shows a fragment that declares a name of the
// prelude checked with its own declaration in the place of the prelude's.
func TestSnippetCheckPreludeGivesWay(t *testing.T) {
	c := &Checker{Dir: ".", Prelude: "package snippet\n\nfunc handler() string { return \"\" }\n\nvar (\n\tx string = handler()\n\twindow = 1\n)\n"}
	b := Block{File: "doc.md", Line: 1, Code: "func handler() int { return 1 }\n\nvar window = handler() + 1\n"}
	err := c.Check(b)
	if err == nil || !strings.Contains(err.Error(), "handler()") {
		t.Fatalf("the prelude's x, which wants handler to return a string, was not checked with the block's handler: %v", err)
	}
	c.Prelude = "package snippet\n\nfunc handler() string { return \"\" }\n\nvar window = 1\n"
	if err := c.Check(b); err != nil {
		t.Errorf("the block's declarations did not take the prelude's place: %v", err)
	}
}

// TestSnippetCheckReports shows the checker passing a good fragment, with a name
// from the prelude and an unused variable, skipping a marked fragment that
// does not compile, and reporting a broken one at its line in the Markdown.
func TestSnippetCheckReports(t *testing.T) {
	md := "Intro.\n" +
		"```go\n" + // line 2
		"d, err := time.ParseDuration(window)\n" + // line 3: err is not used
		"fmt.Println(d)\n" +
		"```\n" +
		"```go fragment\n" +
		"d := time.ParseDuration(...)\n" +
		"```\n" +
		"```go\n" + // line 9
		"n := strings.Count(window)\n" + // line 10: Count takes two arguments
		"fmt.Println(n)\n" +
		"```\n"
	c := &Checker{Dir: ".", Prelude: "package snippet\n\nvar window = \"1h\"\n"}
	blocks := Extract("sample.md", []byte(md))
	if len(blocks) != 3 {
		t.Fatalf("got %d blocks, want 3", len(blocks))
	}
	if err := c.Check(blocks[0]); err != nil {
		t.Errorf("a good fragment fails: %v", err)
	}
	if err := c.Check(blocks[1]); err != nil {
		t.Errorf("a marked fragment is checked: %v", err)
	}
	err := c.Check(blocks[2])
	if err == nil {
		t.Fatal("a broken fragment passes")
	}
	if !strings.HasPrefix(err.Error(), "sample.md:10:") || !strings.Contains(err.Error(), "strings.Count") {
		t.Errorf("the error does not name the block's line: %v", err)
	}
}

// TestSnippetCheckCompleteFile shows a whole file checked alone, without the
// prelude, and an error in it reported at its line.
func TestSnippetCheckCompleteFile(t *testing.T) {
	c := &Checker{Dir: ".", Prelude: "package snippet\n\nvar window = \"1h\"\n"}
	good := Block{File: "f.md", Line: 5, Code: "package mine\n\nimport \"time\"\n\nvar D = time.Hour\n"}
	if err := c.Check(good); err != nil {
		t.Errorf("a whole file fails: %v", err)
	}
	bad := Block{File: "f.md", Line: 5, Code: "package mine\n\nvar W = window\n"}
	err := c.Check(bad)
	if err == nil || !strings.HasPrefix(err.Error(), "f.md:7:") {
		t.Errorf("a whole file sees the prelude, or its error is not at f.md:7: %v", err)
	}
}
