package idemhttp

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem/internal/answer"
	"github.com/idemgo/idem/internal/clientkey"
)

// openAPIFragment is the OpenAPI 3.1 fragment of docs/http.md, which APIs
// paste into their own documents.
const openAPIFragment = "../docs/openapi/idempotency.json"

// sourceKind is one kind of problem as the package's source writes it.
type sourceKind struct {
	slug, title string
	status      int
	retry       bool
}

// tableAnswers are the answers of the table (internal/answer) by their
// names, for sourceKinds to read a call of answering.
var tableAnswers = map[string]answer.Answer{
	"KeyRequired": answer.KeyRequired, "InvalidKey": answer.InvalidKey, "ClientUnknown": answer.ClientUnknown,
	"KeyReused": answer.KeyReused, "InFlight": answer.InFlight, "Conflict": answer.Conflict,
	"OutcomeUnknown": answer.OutcomeUnknown, "Unfinished": answer.Unfinished,
	"ResponseTooLarge": answer.ResponseTooLarge, "RecordDamaged": answer.RecordDamaged, "InternalError": answer.InternalError,
}

// TestTableAnswersAreAll keeps tableAnswers whole: it names every answer
// of the table, so that sourceKinds reads a call of answering with any
// of them.
func TestTableAnswersAreAll(t *testing.T) {
	named := map[answer.Answer]bool{}
	for _, a := range tableAnswers {
		named[a] = true
	}
	for _, a := range answer.All {
		if !named[a] {
			t.Errorf("tableAnswers does not name %s", a.Slug)
		}
	}
	if len(named) != len(answer.All) {
		t.Errorf("tableAnswers names %d answers, the table has %d", len(named), len(answer.All))
	}
}

// sourceKinds reads every kind{...} literal of the package's source, and
// every call answering(answer.Name, "title", detail), whose slug, status
// and retry are the table's, so that a kind added, or one whose slug,
// title, status or retry changes, reaches the comparison with the fragment
// without anyone listing it by hand. A literal or call whose fields are
// not written as constants fails the test: the fragment could not be
// checked against it.
func sourceKinds(t *testing.T) map[string]sourceKind {
	t.Helper()
	statuses := map[string]int{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			statuses["Status"+strings.Map(func(r rune) rune {
				if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
					return r
				}
				return -1
			}, text)] = code
		}
	}
	fset := token.NewFileSet()
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]sourceKind{}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		add := func(pos token.Pos, k sourceKind) {
			if k.slug == "" || k.title == "" || k.status == 0 {
				t.Fatalf("%s: a kind without a slug, title or status", fset.Position(pos))
			}
			if prev, dup := kinds[k.slug]; dup && prev != k {
				t.Errorf("%s: kind %q is %+v, and elsewhere %+v: one slug, one kind", fset.Position(pos), k.slug, k, prev)
			}
			kinds[k.slug] = k
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok && fd.Name.Name == "answering" {
				return false // its literal is each call's, read at the call
			}
			if call, ok := n.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "answering" {
					return true
				}
				sel, ok := call.Args[0].(*ast.SelectorExpr)
				a, known := tableAnswers[fmt.Sprint(sel.Sel)]
				if !ok || !known || fmt.Sprint(sel.X) != "answer" {
					t.Fatalf("%s: answering of an answer that is not the table's, by its name", fset.Position(call.Pos()))
				}
				title, err := stringLit(call.Args[1])
				if err != nil {
					t.Fatalf("%s: the title of a kind is not written as a constant, which this test can read", fset.Position(call.Args[1].Pos()))
				}
				add(call.Pos(), sourceKind{slug: a.Slug, title: title, status: a.Status, retry: a.Retry})
				return true
			}
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if id, ok := lit.Type.(*ast.Ident); !ok || id.Name != "kind" {
				return true
			}
			var k sourceKind
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					t.Fatalf("%s: a kind literal without field names", fset.Position(el.Pos()))
				}
				field := kv.Key.(*ast.Ident).Name
				var bad bool
				switch field {
				case "slug", "title":
					s, err := stringLit(kv.Value)
					if bad = err != nil; !bad && field == "slug" {
						k.slug = s
					} else if !bad {
						k.title = s
					}
				case "status":
					switch v := kv.Value.(type) {
					case *ast.SelectorExpr:
						k.status, ok = statuses[v.Sel.Name]
						bad = !ok || v.X.(*ast.Ident).Name != "http"
					case *ast.BasicLit:
						k.status, err = strconv.Atoi(v.Value)
						bad = err != nil
					default:
						bad = true
					}
				case "retry":
					id, ok := kv.Value.(*ast.Ident)
					bad = !ok || id.Name != "true" && id.Name != "false"
					k.retry = ok && id.Name == "true"
				}
				if bad {
					t.Fatalf("%s: the %s of a kind is not written as a constant, which this test can read", fset.Position(kv.Pos()), field)
				}
			}
			add(lit.Pos(), k)
			return true
		})
	}
	return kinds
}

func stringLit(e ast.Expr) (string, error) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", strconv.ErrSyntax
	}
	return strconv.Unquote(lit.Value)
}

// schemaName is the name of a kind's schema in the fragment.
func schemaName(slug string) string {
	name := "IdempotencyProblem"
	for _, part := range strings.Split(slug, "-") {
		name += strings.ToUpper(part[:1]) + part[1:]
	}
	return name
}

// resolve returns the value at ref, a JSON pointer within doc ("#/a/b").
func resolve(doc any, ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	v := doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return v, true
}

// refs calls f with every $ref of v and the path to it.
func refs(v any, path string, f func(path, ref string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				f(path, s)
				continue
			}
			refs(x, path+"/"+k, f)
		}
	case []any:
		for i, x := range v {
			refs(x, path+"/"+strconv.Itoa(i), f)
		}
	}
}

// at returns the object at the keys path of v, failing the test if it is
// not there.
func at(t *testing.T, v any, path ...string) map[string]any {
	t.Helper()
	for i, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s is not an object", strings.Join(path[:i], "."))
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("the fragment has no %s", strings.Join(path[:i+1], "."))
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", strings.Join(path, "."))
	}
	return m
}

// TestOpenAPIFragment holds docs/openapi/idempotency.json to the package:
// it is OpenAPI 3.1 whose every $ref resolves within it, so that it can be
// pasted as it is; its problem schemas are exactly the kinds of the
// package's source, each with its type under the default base (and, with
// that base replaced, the type that WithProblemTypeBase gives), title and
// status; each status has one response, with every kind of that status
// and no other, Retry-After exactly where the kinds ask for it, and Allow
// on 405; and its key parameters, optional and required, name the header
// and take exactly the keys that the middleware takes.
func TestOpenAPIFragment(t *testing.T) {
	raw, err := os.ReadFile(openAPIFragment)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIFragment, err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", v)
	}
	if title, _ := at(t, doc, "info")["title"].(string); title == "" {
		t.Error("info has no title, which OpenAPI requires")
	}
	if version, _ := at(t, doc, "info")["version"].(string); version == "" {
		t.Error("info has no version, which OpenAPI requires")
	}
	n := 0
	refs(doc, "", func(path, ref string) {
		n++
		if _, ok := resolve(doc, ref); !ok {
			t.Errorf("%s: $ref %q does not resolve within the fragment", path, ref)
		}
	})
	if n == 0 {
		t.Error("the fragment has no $ref at all")
	}

	base, _ := at(t, doc, "info")["x-problem-type-base"].(string)
	if base != DefaultProblemTypeBase {
		t.Errorf("x-problem-type-base %q, want DefaultProblemTypeBase, %q", base, DefaultProblemTypeBase)
	}
	// The fragment with another base is what WithProblemTypeBase makes.
	const other = "https://api.example.com/problems/"
	var swapped map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), DefaultProblemTypeBase, other)), &swapped); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	if err := WithProblemTypeBase(other)(&cfg); err != nil {
		t.Fatal(err)
	}

	kinds := sourceKinds(t)
	if len(kinds) < 15 {
		t.Fatalf("read %d kinds from the source, want at least the 15 of docs/http.md: is the parser missing some?", len(kinds))
	}
	schemas := at(t, doc, "components", "schemas")
	byStatus := map[int][]string{}
	for slug, k := range kinds {
		name := schemaName(slug)
		if _, ok := schemas[name]; !ok {
			t.Errorf("kind %q has no schema %s in the fragment", slug, name)
			continue
		}
		props := at(t, schemas, name, "properties")
		want := map[string]any{"type": DefaultProblemTypeBase + slug, "title": k.title, "status": float64(k.status)}
		for field, w := range want {
			if got := at(t, props, field)["const"]; got != w {
				t.Errorf("%s: %s is %v, want %v", name, field, got, w)
			}
		}
		if got := at(t, swapped, "components", "schemas", name, "properties", "type")["const"]; got != cfg.problem(kind{slug: slug}).Type {
			t.Errorf("%s with the base %s: type %v, want %q, as WithProblemTypeBase makes it", name, other, got, cfg.problem(kind{slug: slug}).Type)
		}
		byStatus[k.status] = append(byStatus[k.status], slug)
	}
	for name := range schemas {
		if name == "IdempotencyProblem" || name == "IdempotencyKey" {
			continue
		}
		slug := strings.TrimPrefix(name, "IdempotencyProblem")
		found := false
		for s := range kinds {
			found = found || schemaName(s) == name
		}
		if !found {
			t.Errorf("schema %s (%s) is no kind of the package's source", name, slug)
		}
	}

	responses := at(t, doc, "components", "responses")
	for status, slugs := range byStatus {
		name := "IdempotencyProblem" + strconv.Itoa(status)
		if _, ok := responses[name]; !ok {
			t.Errorf("no response %s for the kinds %v", name, slugs)
			continue
		}
		schema := at(t, responses, name, "content", "application/problem+json", "schema")
		var got []string
		if ref, ok := schema["$ref"].(string); ok {
			got = append(got, ref)
		}
		if list, ok := schema["oneOf"].([]any); ok {
			for _, x := range list {
				ref, _ := x.(map[string]any)["$ref"].(string)
				got = append(got, ref)
			}
		}
		var want []string
		retry := kinds[slugs[0]].retry
		for _, s := range slugs {
			want = append(want, "#/components/schemas/"+schemaName(s))
			if kinds[s].retry != retry {
				t.Errorf("the kinds of status %d differ in Retry-After, which one response of that status cannot say", status)
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s answers %v, want %v", name, got, want)
		}
		headers := at(t, responses, name, "headers")
		if _, ok := headers["Retry-After"]; ok != retry {
			t.Errorf("%s: Retry-After listed %v, want %v", name, ok, retry)
		}
		if _, ok := headers["Allow"]; ok != (status == http.StatusMethodNotAllowed) {
			t.Errorf("%s: Allow listed %v, want it on 405 alone", name, ok)
		}
		if _, ok := headers["Cache-Control"]; !ok {
			t.Errorf("%s: no Cache-Control, which every problem carries", name)
		}
	}
	for name := range responses {
		status, err := strconv.Atoi(strings.TrimPrefix(name, "IdempotencyProblem"))
		if _, ok := byStatus[status]; err != nil || !ok {
			t.Errorf("response %s answers no status of the package's kinds", name)
		}
	}

	headers := at(t, doc, "components", "headers")
	for _, h := range []string{"IdempotentReplayed", "IdempotencyRetryAfter"} {
		if _, ok := headers[h]; !ok {
			t.Errorf("no header %s", h)
		}
	}
	if got := at(t, headers, "IdempotentReplayed", "schema")["const"]; got != "true" {
		t.Errorf("%s is %v, want the value the middleware sets, true", ReplayedHeader, got)
	}

	for name, required := range map[string]bool{"IdempotencyKey": false, "IdempotencyKeyRequired": true} {
		p := at(t, doc, "components", "parameters", name)
		if p["name"] != DefaultKeyHeader || p["in"] != "header" || p["required"] != required {
			t.Errorf("parameter %s is %v in %v, required %v; want %s in header, required %v", name, p["name"], p["in"], p["required"], DefaultKeyHeader, required)
		}
		if ref := at(t, p, "schema")["$ref"]; ref != "#/components/schemas/IdempotencyKey" {
			t.Errorf("parameter %s has the schema %v, want the key's", name, ref)
		}
	}
	schema := at(t, doc, "components", "schemas", "IdempotencyKey")
	if schema["minLength"] != float64(1) || schema["maxLength"] != float64(clientkey.MaxLength) {
		t.Errorf("the key is %v to %v characters, want 1 to %d", schema["minLength"], schema["maxLength"], clientkey.MaxLength)
	}
	pattern, _ := schema["pattern"].(string)
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("the key's pattern %q: %v", pattern, err)
	}
	for _, k := range []string{"k", "a key", `"quoted"`, "~!#$%&'()*+,-./:;<=>?@[\\]^_`{|}", strings.Repeat("k", 255),
		"", " k", "k ", " ", "k\t", "k\x00", "k\x7f", "straße", "\xff", strings.Repeat("k", 256)} {
		ok := clientkey.Check(k) == ""
		fits := re.MatchString(k) && len(k) >= 1 && len(k) <= clientkey.MaxLength
		if ok != fits {
			t.Errorf("key %q: the middleware takes it %v, the fragment %v", k, ok, fits)
		}
	}
}
