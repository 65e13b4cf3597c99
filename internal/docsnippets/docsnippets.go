// Package docsnippets type-checks the Go code blocks of the repository's
// Markdown, so that a snippet in README.md or docs/ cannot drift from the
// API it shows: a renamed function, a changed signature or a removed option
// fails a test that names the document and the line of the block.
//
// A block is a fenced block whose info string is "go". It is one of three
// kinds:
//
//   - a complete file, whose first line that is not a comment or blank is a
//     package clause: it is checked as it is, alone, with the imports it
//     writes;
//   - a deliberate fragment, fenced as "```go fragment": an excerpt that only
//     shows a shape (a struct field, an expression, a body with "..."), which
//     is skipped;
//   - any other block, a fragment that is wrapped into a file of a package of
//     its own and checked there (see Wrap).
//
// A block fenced as "```go grpc" is one of the last two kinds in a document
// of the root module that the module idemgrpc checks, since it uses gRPC
// (Block.GRPC).
//
// Wrapping keeps the snippet as the reader sees it. Its top-level
// declarations, the lines at column 0 that begin with func, type, var or
// const and the lines that continue them (indented, blank, or beginning with
// a closing brace or parenthesis), stay at file level; every other line goes,
// in order, into the body of one function that returns an error, so that a
// snippet may write "return err" as start-up code does; an import line at
// column 0 goes before the declarations. The names a snippet takes as given
// (ctx, db, store, a handler of the document's running example) come from a
// prelude, other files of the same package that the test supplies (one for
// every document, one for a single document), less any name that the
// snippet declares itself, so that one block may show the handler that
// others only use. The imports come from a fixed table of package names
// (Imports): a name of the table used as the left side of a selector is
// imported. Line directives map every position back to the Markdown, so an
// error reads "docs/http.md:12:3: ...".
//
// Two errors are ignored: "declared and not used" and "imported and not
// used". A snippet shows a use, not a whole program: it declares res to say
// what Do returns without going on to read it, and the table imports a
// package for a name that turns out to be a variable. Every other error is
// the snippet's, or the prelude's.
//
// The checker uses go/types with the importer of the gc compiler's export
// data, which needs no dependency beyond the module's own: the go command
// lists the packages a snippet imports, with their dependencies, in the
// module of the test (Checker.Dir), and hands over their export data, which
// it builds or finds in its build cache (go list -export), the same that
// building the module's tests makes; each package is read once for every
// snippet that the same Checker checks. Type-checking every imported
// package from its source instead, the standard library's and the
// drivers' included, took minutes.
package docsnippets

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
)

// FragmentMarker is the word after "```go" that marks a deliberate fragment,
// which is not checked.
const FragmentMarker = "fragment"

// GRPCMarker is the word after "```go" that marks a block that uses gRPC
// in a document of the root module's: the module idemgrpc checks it,
// since the root module does not depend on grpc-go.
const GRPCMarker = "grpc"

// Block is one Go code block of a Markdown file.
type Block struct {
	File     string // the Markdown file's name, as errors report it
	Line     int    // the line of the block's first line of code, from 1
	Code     string // the lines between the fences
	Fragment bool   // fenced as "```go fragment": not checked
	GRPC     bool   // fenced as "```go grpc": checked in the module idemgrpc
}

// Complete reports whether the block is a whole file: its first line that is
// neither blank nor a line comment is a package clause.
func (b Block) Complete() bool {
	for line := range strings.SplitSeq(b.Code, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "//") {
			continue
		}
		return strings.HasPrefix(t, "package ")
	}
	return false
}

// Extract returns the Go code blocks of the Markdown md, named file in what
// it returns, in order. A fence is a line of three or more backquotes at
// column 0; a block is Go when its info string's first word is "go".
func Extract(file string, md []byte) []Block {
	var blocks []Block
	var cur *Block
	var body strings.Builder
	var fence string
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence == "" {
			if !strings.HasPrefix(line, "```") {
				continue
			}
			fence = line[:len(line)-len(strings.TrimLeft(line, "`"))]
			info := strings.Fields(line[len(fence):])
			if len(info) > 0 && info[0] == "go" {
				cur = &Block{File: file, Line: n + 1,
					Fragment: len(info) > 1 && info[1] == FragmentMarker,
					GRPC:     len(info) > 1 && info[1] == GRPCMarker}
				body.Reset()
			}
			continue
		}
		if strings.HasPrefix(line, fence) && strings.TrimSpace(strings.TrimLeft(line, "`")) == "" {
			if cur != nil {
				cur.Code = body.String()
				blocks = append(blocks, *cur)
				cur = nil
			}
			fence = ""
			continue
		}
		if cur != nil {
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	return blocks
}

// Imports is the table of the package names a fragment may use without
// importing them, and their import paths. It holds the standard library's
// packages that the docs use and the packages of the module and of its
// dependencies; a package outside the module that checks a snippet cannot be
// found, and fails that snippet.
var Imports = map[string]string{
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"filepath": "path/filepath",
	"http":     "net/http",
	"httptest": "net/http/httptest",
	"json":     "encoding/json",
	"log":      "log",
	"sql":      "database/sql",
	"strconv":  "strconv",
	"strings":  "strings",
	"testing":  "testing",
	"time":     "time",

	"idem":       "github.com/idemgo/idem",
	"dialect":    "github.com/idemgo/idem/dialect",
	"driver":     "github.com/idemgo/idem/driver",
	"idemhttp":   "github.com/idemgo/idem/idemhttp",
	"idemclient": "github.com/idemgo/idem/idemclient",
	"idempgx":    "github.com/idemgo/idem/idempgx",
	"idemtest":   "github.com/idemgo/idem/idemtest",
	"idemgrpc":   "github.com/idemgo/idem/idemgrpc",

	"pgx":     "github.com/jackc/pgx/v5",
	"pgxpool": "github.com/jackc/pgx/v5/pgxpool",
	"sqlmock": "github.com/DATA-DOG/go-sqlmock",
	"sqlite3": "github.com/mattn/go-sqlite3",
	"grpc":    "google.golang.org/grpc",
}

// Package is the package name of a wrapped fragment and of its prelude.
const Package = "snippet"

// Wrap returns the file that a fragment is checked as: the package clause,
// the imports the fragment needs out of imports, its top-level declarations,
// and its other lines in the body of a function. Line directives keep every
// line at its place in the Markdown. Wrap does not check the result.
func Wrap(b Block, imports map[string]string) string {
	lines := strings.Split(strings.TrimSuffix(b.Code, "\n"), "\n")
	inside := continuedLines(b.Code)
	var imps, decls, stmts strings.Builder
	inDecl, lastImp, lastDecl, lastStmt := false, -2, -2, -2
	for i, line := range lines {
		switch {
		case inside[i]:
		case startsDecl(line):
			inDecl = true
		case inDecl && !continuesDecl(line):
			inDecl = false
		}
		w, last := &stmts, &lastStmt
		switch {
		case inDecl:
			w, last = &decls, &lastDecl
		case !inside[i] && strings.HasPrefix(line, "import "):
			w, last = &imps, &lastImp
		}
		if *last != i-1 {
			fmt.Fprintf(w, "/*line %s:%d:1*/", b.File, b.Line+i)
		}
		w.WriteString(line)
		w.WriteByte('\n')
		*last = i
	}

	var f strings.Builder
	fmt.Fprintf(&f, "package %s\n\n", Package)
	f.WriteString(imps.String())
	names := slices.DeleteFunc(usedPackages(b.Code, imports), func(name string) bool {
		return strings.Contains(imps.String(), `"`+imports[name]+`"`)
	})
	if len(names) > 0 {
		fmt.Fprintf(&f, "//line %s:%d\n", b.File, b.Line) // a missing package is the block's
		f.WriteString("import (\n")
		for _, name := range names {
			fmt.Fprintf(&f, "\t%s %q\n", name, imports[name])
		}
		f.WriteString(")\n\n")
	}
	f.WriteString(decls.String())
	if stmts.Len() > 0 {
		f.WriteString("\nfunc _() error {\n")
		f.WriteString(stmts.String())
		f.WriteString("\treturn nil\n}\n")
	}
	return f.String()
}

// continuedLines reports, by line index, the lines of code that begin
// inside a raw string or a block comment: they belong to the line where the
// token began, whatever their column.
func continuedLines(code string) map[int]bool {
	inside := map[int]bool{}
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(code))
	var s scanner.Scanner
	s.Init(file, []byte(code), nil, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.STRING && tok != token.COMMENT {
			continue
		}
		first := file.Line(pos)
		for n := range strings.Count(lit, "\n") {
			inside[first+n] = true // line first+n+1, from 1, is index first+n
		}
	}
	return inside
}

// startsDecl reports whether line begins a top-level declaration.
func startsDecl(line string) bool {
	for _, kw := range []string{"func", "type", "var", "const"} {
		if rest, ok := strings.CutPrefix(line, kw); ok && (rest == "" || rest[0] == ' ' || rest[0] == '(') {
			return true
		}
	}
	return false
}

// continuesDecl reports whether line, after a line of a top-level
// declaration, is part of it: indented, blank, a line comment, or the
// closing of a brace or a parenthesis opened at column 0.
func continuesDecl(line string) bool {
	return line == "" || line[0] == ' ' || line[0] == '\t' || line[0] == '}' || line[0] == ')' ||
		strings.HasPrefix(line, "//")
}

// usedPackages returns, sorted, the names of imports that code uses as the
// left side of a selector. It scans tokens, so that it works on a fragment
// that is not yet a file: a name followed by a period, not itself preceded
// by one.
func usedPackages(code string, imports map[string]string) []string {
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile("", -1, len(code)), []byte(code), nil, 0)
	seen := map[string]bool{}
	prev, prevLit := token.ILLEGAL, ""
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && prev == token.IDENT {
			if _, ok := imports[prevLit]; ok {
				seen[prevLit] = true
			}
		}
		if prev == token.PERIOD && tok == token.IDENT {
			tok = token.ILLEGAL // a selector's right side is no package
		}
		prev, prevLit = tok, lit
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Checker type-checks blocks. Its importer, and so every package it has
// loaded from source, is shared by the blocks it checks.
type Checker struct {
	// Dir is the directory the go command finds imported packages from: one
	// in the module whose dependencies the snippets need.
	Dir string
	// Prelude is the source of a file of package Package that is checked with
	// every fragment: the names the fragments assume.
	Prelude string
	// DocPreludes are further files of package Package, by the Markdown
	// file's name as in Block.File: the names of one document's running
	// example, checked with that document's fragments only.
	DocPreludes map[string]string
	// Imports is the table of package names; nil means the package's Imports.
	Imports map[string]string
	// Stubs are packages that the docs import and the module does not have,
	// such as the code generated for a service: import path to the source of
	// one file.
	Stubs map[string]string

	fset    *token.FileSet
	gc      types.Importer
	exports map[string]string // import path to its export data, as go list gave it
	stubs   map[string]*types.Package
}

// Check type-checks b and returns its errors, nil when it compiles. A
// deliberate fragment is not checked and returns nil.
func (c *Checker) Check(b Block) error {
	if b.Fragment {
		return nil
	}
	c.init()
	var files []*ast.File
	if b.Complete() {
		f, err := c.parse("snippet.go", fmt.Sprintf("//line %s:%d\n%s", b.File, b.Line, b.Code))
		if err != nil {
			return err
		}
		files = append(files, f)
	} else {
		imports := c.Imports
		if imports == nil {
			imports = Imports
		}
		f, err := c.parse("snippet.go", Wrap(b, imports))
		if err != nil {
			return err
		}
		files = append(files, f)
		own := declared(f)
		for name, src := range map[string]string{"prelude.go": c.Prelude, "prelude_doc.go": c.DocPreludes[b.File]} {
			if src == "" {
				continue
			}
			p, err := c.parse(name, src)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			files = append(files, without(p, own))
		}
	}
	return c.check(files[0].Name.Name, files)
}

// declared returns the names that f declares at file level, but methods.
func declared(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names
}

// without drops from the prelude p what a fragment declares itself, so that
// a snippet may write the function that the prelude stands in for
// elsewhere: the handler that one block uses and another shows.
func without(p *ast.File, names map[string]bool) *ast.File {
	var decls []ast.Decl
	for _, d := range p.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && names[d.Name.Name] {
				continue
			}
		case *ast.GenDecl:
			var specs []ast.Spec
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if names[s.Name.Name] {
						continue
					}
				case *ast.ValueSpec:
					if slices.ContainsFunc(s.Names, func(n *ast.Ident) bool { return names[n.Name] }) {
						continue
					}
				}
				specs = append(specs, s)
			}
			if len(specs) == 0 && d.Tok != token.IMPORT {
				continue
			}
			d2 := *d
			d2.Specs = specs
			d = &d2
			decls = append(decls, d)
			continue
		}
		decls = append(decls, d)
	}
	p2 := *p
	p2.Decls = decls
	return &p2
}

func (c *Checker) init() {
	if c.fset == nil {
		c.fset = token.NewFileSet()
		c.gc = importer.ForCompiler(c.fset, "gc", c.exportData)
		c.exports = map[string]string{}
		c.stubs = map[string]*types.Package{}
	}
}

// exportData opens the export data of path for the gc importer, listing it
// first (list) where no earlier list found it: the packages of the import
// table are listed at once, on the first import, and their dependencies
// with them.
func (c *Checker) exportData(path string) (io.ReadCloser, error) {
	if _, ok := c.exports[path]; !ok {
		imports := c.Imports
		if imports == nil {
			imports = Imports
		}
		paths := []string{path}
		if len(c.exports) == 0 {
			paths = append(paths, slices.Sorted(maps.Values(imports))...)
		}
		if err := c.list(paths); err != nil {
			return nil, err
		}
	}
	file := c.exports[path]
	if file == "" {
		return nil, fmt.Errorf("no export data for %s in the module of %s: is it among the module's dependencies?", path, c.Dir)
	}
	return os.Open(file)
}

// list asks the go command, in c.Dir, for the export data of paths and of
// their dependencies. A path the module does not have is listed without
// export data, and fails when a snippet imports it.
func (c *Checker) list(paths []string) error {
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-export", "-json=ImportPath,Export"}, paths...)...)
	cmd.Dir = c.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -export %s: %v: %s", strings.Join(paths, " "), err, stderr.Bytes())
	}
	for d := json.NewDecoder(bytes.NewReader(out)); d.More(); {
		var p struct{ ImportPath, Export string }
		if err := d.Decode(&p); err != nil {
			return fmt.Errorf("go list -export: %w", err)
		}
		c.exports[p.ImportPath] = p.Export
	}
	for _, p := range paths {
		if _, ok := c.exports[p]; !ok {
			c.exports[p] = "" // listed, without export data
		}
	}
	return nil
}

func (c *Checker) parse(name, src string) (*ast.File, error) {
	return parser.ParseFile(c.fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
}

// check type-checks files as the package name, and returns the errors that
// are not ignored, joined.
func (c *Checker) check(name string, files []*ast.File) error {
	var errs []error
	conf := types.Config{
		Importer: importerFunc(c.importFrom),
		Error: func(err error) {
			if !ignored(err) {
				errs = append(errs, err)
			}
		},
	}
	conf.Check(name, c.fset, files, nil) // its errors are those given to Error
	return errors.Join(errs...)
}

// ignored reports whether err is one that a snippet may have: a variable or
// an import that it declares and does not use.
func ignored(err error) bool {
	var te types.Error
	if !errors.As(err, &te) {
		return false
	}
	return strings.Contains(te.Msg, "declared and not used") || strings.Contains(te.Msg, "imported and not used")
}

// importFrom imports a stub from its source, and any other package from its
// export data, listed in c.Dir whatever directory the file is in: a
// document outside the module of the test is checked in that module.
func (c *Checker) importFrom(path string) (*types.Package, error) {
	if src, ok := c.Stubs[path]; ok {
		if p := c.stubs[path]; p != nil {
			return p, nil
		}
		f, err := c.parse(path+"/stub.go", src)
		if err != nil {
			return nil, err
		}
		conf := types.Config{Importer: importerFunc(c.importFrom)}
		p, err := conf.Check(path, c.fset, []*ast.File{f}, nil)
		if err != nil {
			return nil, fmt.Errorf("the stub of %s: %w", path, err)
		}
		c.stubs[path] = p
		return p, nil
	}
	return c.gc.Import(path)
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
