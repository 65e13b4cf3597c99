package idem_test

import (
	"context"
	"database/sql"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/driver"
	"github.com/idemgo/idem/idempgx"
)

// notOperations are the Store's methods that run nothing on a database, and
// which the Engine and the driver packages therefore do not repeat.
var notOperations = []string{"Dialect", "LooksUpFirst", "MaxResponseBytes", "Queries", "Schema"}

// TestFacadesAgree checks that the Store, the Engine and idempgx's Store
// offer the same operations with the same arguments and results, but for
// what each driver names its own way: the database or transaction the
// operation runs on, the options of the transactions it begins (an
// argument of the Store's and idempgx's, carried by the Engine's database),
// and the Func, which takes the driver's transaction. An operation added to
// one of them and not the others fails here.
func TestFacadesAgree(t *testing.T) {
	type facade struct {
		name  string
		typ   reflect.Type
		own   map[reflect.Type]string // the driver's types, as the test names them
		extra []string                // methods that are not operations
	}
	facades := []facade{
		{"idem.Engine", reflect.TypeFor[idem.Engine[pgx.Tx]](), map[reflect.Type]string{
			reflect.TypeFor[driver.DB[pgx.Tx]]():                                    "database",
			reflect.TypeFor[driver.Tx]():                                            "database",
			reflect.TypeFor[func(context.Context) (idem.Response, error)]():         "func",
			reflect.TypeFor[func(context.Context, pgx.Tx) (idem.Response, error)](): "func",
		}, nil},
		{"idem.Store", reflect.TypeFor[*idem.Store](), map[reflect.Type]string{
			reflect.TypeFor[*sql.DB]():        "database",
			reflect.TypeFor[*sql.Tx]():        "database",
			reflect.TypeFor[idem.Querier]():   "database",
			reflect.TypeFor[*sql.TxOptions](): "options",
			reflect.TypeFor[idem.Func]():      "func",
		}, notOperations},
		{"idempgx.Store", reflect.TypeFor[*idempgx.Store](), map[reflect.Type]string{
			reflect.TypeFor[*pgxpool.Pool](): "database",
			reflect.TypeFor[pgx.Tx]():        "database",
			reflect.TypeFor[pgx.TxOptions](): "options",
			reflect.TypeFor[idempgx.Func]():  "func",
		}, nil},
	}
	// signature names a method's arguments and results, with the driver's
	// own types replaced by what they are, and the options left out.
	signature := func(f facade, m reflect.Method) string {
		name := func(t reflect.Type) string {
			if n, ok := f.own[t]; ok {
				return n
			}
			return t.String()
		}
		var in, out []string
		for i := 1; i < m.Type.NumIn(); i++ { // 0 is the receiver
			if n := name(m.Type.In(i)); n != "options" {
				in = append(in, n)
			}
		}
		for i := range m.Type.NumOut() {
			out = append(out, name(m.Type.Out(i)))
		}
		return "(" + strings.Join(in, ", ") + ") (" + strings.Join(out, ", ") + ")"
	}
	operations := func(f facade) map[string]string {
		ops := map[string]string{}
		for i := range f.typ.NumMethod() {
			m := f.typ.Method(i)
			if !slices.Contains(f.extra, m.Name) {
				ops[m.Name] = signature(f, m)
			}
		}
		return ops
	}
	want := operations(facades[0])
	if len(want) < 12 {
		t.Fatalf("the Engine has %d operations, want Do, DoTx, Run, Resume, Lookup, Migrate and the operators' actions: %v", len(want), want)
	}
	for _, f := range facades[1:] {
		got := operations(f)
		for op, sig := range want {
			switch g, ok := got[op]; {
			case !ok:
				t.Errorf("%s has no %s, which the Engine has", f.name, op)
			case g != sig:
				t.Errorf("%s.%s%s, the Engine's %s%s", f.name, op, g, op, sig)
			}
		}
		for op := range got {
			if _, ok := want[op]; !ok {
				t.Errorf("%s has %s, which the Engine has not", f.name, op)
			}
		}
	}
	// The options are an argument of the same operations, in the same
	// place, on database/sql and on pgx.
	options := func(f facade) map[string]int {
		at := map[string]int{}
		for i := range f.typ.NumMethod() {
			m := f.typ.Method(i)
			for j := 1; j < m.Type.NumIn(); j++ {
				if f.own[m.Type.In(j)] == "options" {
					at[m.Name] = j
				}
			}
		}
		return at
	}
	if s, p := options(facades[1]), options(facades[2]); !reflect.DeepEqual(s, p) {
		t.Errorf("transaction options: idem.Store takes them in %v, idempgx.Store in %v", s, p)
	}
}
