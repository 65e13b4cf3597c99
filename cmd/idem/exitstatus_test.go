package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHelpListsExitStatuses derives from the command's own source the exit
// statuses that each command can return, and compares them with the
// "Exit status:" list of its help, and with idem -h, whose list names for
// each status the commands that return it (none for a status that every
// command returns). The statuses of a command are those that run gives any
// command (for no error and an error without one), and the exit constants
// that the functions, methods and package variables reachable from the
// command's function name: usageError's, a refusal's among those the
// command passes to refused, inspect's own. The help of each runs through
// the built command.
func TestHelpListsExitStatuses(t *testing.T) {
	t.Parallel()
	derived := deriveExitStatuses(t)
	all := map[int][]string{} // status: the commands that return it
	for _, c := range commands {
		for _, s := range derived[c.name] {
			all[s] = append(all[s], c.name)
		}
		r := runBuilt(t, c.name, "-h")
		r.wantCode(t, exitOK)
		listed := slices.Sorted(maps.Keys(helpStatuses(t, "idem "+c.name+" -h", r.stdout)))
		if !slices.Equal(listed, derived[c.name]) {
			t.Errorf("idem %s -h lists exit statuses %v; the command returns %v", c.name, listed, derived[c.name])
		}
	}

	r := runBuilt(t, "-h")
	r.wantCode(t, exitOK)
	listed := helpStatuses(t, "idem -h", r.stdout)
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	for s, cmds := range all {
		line, ok := listed[s]
		if !ok {
			t.Errorf("idem -h does not list exit status %d, which %v return", s, cmds)
			continue
		}
		// "3  inspect, settle, release, forget: no live record", or a
		// line of every command.
		named := names
		if before, _, ok := strings.Cut(line, ":"); ok {
			list := strings.Split(before, ", ")
			if !slices.ContainsFunc(list, func(n string) bool { return !slices.Contains(names, n) }) {
				named = list
			}
		}
		if !slices.Equal(named, cmds) {
			t.Errorf("idem -h: exit status %d is %q, of %v; the commands that return it are %v", s, line, named, cmds)
		}
	}
	for s := range listed {
		if _, ok := all[s]; !ok {
			t.Errorf("idem -h lists exit status %d, which no command returns", s)
		}
	}
}

// helpStatuses reads the list below "Exit status" in a help: each status
// with its text, the lines that continue it joined.
func helpStatuses(t *testing.T, what, help string) map[int]string {
	t.Helper()
	_, rest, ok := strings.Cut(help, "\nExit status")
	if !ok {
		t.Errorf("%s has no exit statuses", what)
		return nil
	}
	_, rest, _ = strings.Cut(rest, "\n")
	item := regexp.MustCompile(`^  (\d+)  (.*)$`)
	listed := map[int]string{}
	last := -1
	for _, l := range strings.Split(rest, "\n") {
		if m := item.FindStringSubmatch(l); m != nil {
			last, _ = strconv.Atoi(m[1])
			listed[last] = m[2]
			continue
		}
		if !strings.HasPrefix(l, "     ") || last < 0 {
			break
		}
		listed[last] += " " + strings.TrimSpace(l)
	}
	if len(listed) == 0 {
		t.Errorf("%s lists no exit status", what)
	}
	return listed
}

// deriveExitStatuses reads the package's source (not its tests) and returns,
// for each command, the sorted exit statuses it can return.
func deriveExitStatuses(t *testing.T) map[string][]int {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	src := &source{funcs: map[string]ast.Node{}, methods: map[string][]ast.Node{}, vars: map[string]ast.Node{}, statuses: map[string]int{}, top: map[any]bool{}}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		src.add(t, f)
	}
	if len(src.statuses) == 0 {
		t.Fatal("no exit constants in the source")
	}
	run, ok := src.funcs["run"]
	if !ok {
		t.Fatal("no function run in the source")
	}
	// run itself: nil is exitOK, an error without a status exitError.
	// Only its own body counts: through dispatch it reaches every command.
	base := map[int]bool{}
	ast.Inspect(run, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if s, ok := src.statuses[id.Name]; ok {
				base[s] = true
			}
		}
		return true
	})

	derived := map[string][]int{}
	for _, c := range commands {
		full := runtime.FuncForPC(reflect.ValueOf(c.run).Pointer()).Name()
		fn := full[strings.LastIndex(full, ".")+1:]
		decl, ok := src.funcs[fn]
		if !ok {
			t.Fatalf("command %s runs %s, which the source does not declare", c.name, full)
		}
		found := map[int]bool{}
		for s := range base {
			found[s] = true
		}
		src.reach(decl, found, map[ast.Node]bool{})
		derived[c.name] = slices.Sorted(maps.Keys(found))
	}
	return derived
}

// source is what the package declares: its functions, its methods by name
// (whatever their receiver), its package variables, and the values of its
// exit constants.
type source struct {
	funcs, vars map[string]ast.Node
	methods     map[string][]ast.Node
	statuses    map[string]int
	// top are the package's own declarations, for telling a name of
	// the package from a local one that shadows it.
	top map[any]bool
}

func (s *source) add(t *testing.T, f *ast.File) {
	t.Helper()
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			s.top[d] = true
			if d.Recv != nil {
				s.methods[d.Name.Name] = append(s.methods[d.Name.Name], d)
			} else {
				s.funcs[d.Name.Name] = d
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				s.top[vs] = true
				for i, name := range vs.Names {
					switch {
					case d.Tok == token.CONST && strings.HasPrefix(name.Name, "exit") && i < len(vs.Values):
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok {
							t.Fatalf("exit constant %s is not a number", name.Name)
						}
						v, err := strconv.Atoi(lit.Value)
						if err != nil {
							t.Fatalf("exit constant %s: %v", name.Name, err)
						}
						s.statuses[name.Name] = v
					case d.Tok == token.VAR && i < len(vs.Values):
						s.vars[name.Name] = vs.Values[i]
					}
				}
			}
		}
	}
}

// reach adds to found the exit statuses that n names, and those of every
// function, method and package variable that n names, transitively. A name
// after a dot is taken for a method of the package, of any receiver; a
// plain name for a function or variable of the package, unless the parser
// resolved it to a declaration inside a function.
func (s *source) reach(n ast.Node, found map[int]bool, seen map[ast.Node]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			s.reach(n.X, found, seen)
			for _, m := range s.methods[n.Sel.Name] {
				s.reach(m, found, seen)
			}
			return false
		case *ast.Ident:
			if n.Obj != nil && !s.top[n.Obj.Decl] {
				return true // a local name, such as a variable run
			}
			if v, ok := s.statuses[n.Name]; ok {
				found[v] = true
			}
			if f, ok := s.funcs[n.Name]; ok {
				s.reach(f, found, seen)
			}
			if v, ok := s.vars[n.Name]; ok {
				s.reach(v, found, seen)
			}
		}
		return true
	})
}
