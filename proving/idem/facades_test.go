package idem_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
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

// TestFacadesRefuseWhatCannotRun calls every operation of the Store, the
// Engine and idempgx's Store with a nil database or transaction, and with a
// Store not made by New on a database that fails every statement: each must
// answer ErrInvalidArgument before it sends anything, on every façade.
func TestFacadesRefuseWhatCannotRun(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	failing := sql.OpenDB(failingConnector{})
	defer failing.Close()
	pool, err := pgxpool.New(context.Background(), "host=127.0.0.1 port=1 connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var tx *sql.Tx // nil: Do gets no transaction
	cases := []struct {
		name   string
		facade any
		db     any // the database or transaction the operation gets
	}{
		{"Store, nil database", store, nil},
		{"Store not made by New", new(idem.Store), failing},
		{"Engine, nil database", idem.EngineOf[pgx.Tx](store), nil},
		{"zero Engine", idem.Engine[pgx.Tx]{}, failingDB{}},
		{"idempgx, nil pool", idempgx.New(store), nil},
		{"idempgx on a Store not made by New", idempgx.New(new(idem.Store)), pool},
	}
	for _, c := range cases {
		v := reflect.ValueOf(c.facade)
		for i := range v.NumMethod() {
			m := v.Type().Method(i)
			if slices.Contains(notOperations, m.Name) {
				continue
			}
			f := v.Method(i)
			args := make([]reflect.Value, f.Type().NumIn())
			for j := range args {
				in := f.Type().In(j)
				switch {
				case j == 0:
					args[j] = reflect.ValueOf(context.Background())
				case j == 1 && c.db != nil && reflect.TypeOf(c.db).AssignableTo(in):
					args[j] = reflect.ValueOf(c.db)
				case j == 1 && c.db != nil && in == reflect.TypeFor[*sql.Tx]():
					args[j] = reflect.ValueOf(tx) // Do on a Store not made by New
				case in.Kind() == reflect.String:
					args[j] = reflect.ValueOf("k").Convert(in)
				case in.Kind() == reflect.Int:
					args[j] = reflect.ValueOf(10)
				default:
					args[j] = reflect.Zero(in)
				}
			}
			if f.Type().IsVariadic() {
				args[len(args)-1] = reflect.Zero(f.Type().In(len(args) - 1))
			}
			var out []reflect.Value
			if f.Type().IsVariadic() {
				out = f.CallSlice(args)
			} else {
				out = f.Call(args)
			}
			err, _ := out[len(out)-1].Interface().(error)
			if !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("%s: %s: %v, want ErrInvalidArgument", c.name, m.Name, err)
			}
		}
	}
}

// errSent is the error of a database that fails every statement: an
// operation that answers it sent something.
var errSent = errors.New("a statement was sent")

type failingConnector struct{}

func (failingConnector) Connect(context.Context) (sqldriver.Conn, error) { return nil, errSent }
func (failingConnector) Driver() sqldriver.Driver                        { return nil }

// failingDB is a driver.DB on which every statement fails.
type failingDB struct{}

func (failingDB) Exec(context.Context, string, ...any) (int64, error) { return 0, errSent }
func (failingDB) QueryRow(context.Context, string, []any, ...any) error {
	return errSent
}
func (failingDB) Query(context.Context, string, []any, func(func(...any) error) error) error {
	return errSent
}
func (failingDB) Begin(context.Context, ...driver.Statement) (driver.Owned[pgx.Tx], []driver.Row, error) {
	return nil, nil, errSent
}
