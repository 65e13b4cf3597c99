package idemgrpc_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
	"github.com/idemgo/idem/idemhttp"
)

func TestConfiguration(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db := new(sql.DB) // never used: the constructor does not touch the database
	single := idemgrpc.WithSingleClient()
	for _, c := range []struct {
		name  string
		store *idem.Store
		db    *sql.DB
		opts  []idemgrpc.Option
		want  []string // in the error, each; none for a good configuration
	}{
		{"good", store, db, []idemgrpc.Option{protected, single}, nil},
		{"every option", store, db, []idemgrpc.Option{
			idemgrpc.WithMethods(placeMethod),
			idemgrpc.WithKeyMetadata("X-Key.v1_a"),
			idemgrpc.WithKeyRequired(),
			idemgrpc.WithScope(func(context.Context) (string, error) { return "s", nil }),
			idemgrpc.WithStoredErrors(codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
				codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented),
			idemgrpc.WithRetryPushback(time.Millisecond),
			idemgrpc.WithErrorHook(func(context.Context, string, error) {}),
			nil, // skipped, as package idem skips it
		}, nil},
		{"filter", store, db, []idemgrpc.Option{idemgrpc.WithMethodFilter(func(string) bool { return true }), single}, nil},
		{"no scope chosen", store, db, []idemgrpc.Option{protected}, []string{"choose WithScope"}},
		{"scope and single client", store, db, []idemgrpc.Option{protected, single,
			idemgrpc.WithScope(func(context.Context) (string, error) { return "s", nil })}, []string{"choose WithScope"}},
		{"nil store", nil, db, []idemgrpc.Option{protected}, []string{"nil store"}},
		{"zero store", new(idem.Store), db, []idemgrpc.Option{protected}, []string{"not made by idem.New"}},
		{"nil database", store, nil, []idemgrpc.Option{protected}, []string{"nil database"}},
		{"no methods", store, db, nil, []string{"no methods to protect"}},
		{"both", store, db, []idemgrpc.Option{protected, idemgrpc.WithMethodFilter(func(string) bool { return true })}, []string{"choose one"}},
		{"empty methods", store, db, []idemgrpc.Option{idemgrpc.WithMethods()}, []string{"no methods"}},
		{"bad method names", store, db, []idemgrpc.Option{idemgrpc.WithMethods("idemgrpc.test.Shop/Place", "/idemgrpc.test.Shop", "/a/b/c", "//Place")},
			[]string{`"idemgrpc.test.Shop/Place" is not a full method name`, `"/idemgrpc.test.Shop" is not`, `"/a/b/c" is not`, `"//Place" is not`}},
		{"unknown service", store, db, []idemgrpc.Option{idemgrpc.WithMethods("/idemgrpc.test.Nope/Place")}, []string{"not registered"}},
		{"not a service", store, db, []idemgrpc.Option{idemgrpc.WithMethods("/idemgrpc.test.Parcel/Place")}, []string{"is not a service"}},
		{"unknown method", store, db, []idemgrpc.Option{idemgrpc.WithMethods("/idemgrpc.test.Shop/Steal")}, []string{"has no method Steal"}},
		{"streaming method", store, db, []idemgrpc.Option{idemgrpc.WithMethods(watchMethod)}, []string{"streams"}},
		{"nil filter", store, db, []idemgrpc.Option{idemgrpc.WithMethodFilter(nil)}, []string{"nil method filter"}},
		{"bad key names", store, db, []idemgrpc.Option{protected,
			idemgrpc.WithKeyMetadata(""), idemgrpc.WithKeyMetadata("grpc-key"), idemgrpc.WithKeyMetadata("key-bin"),
			idemgrpc.WithKeyMetadata("idempotency key"), idemgrpc.WithKeyMetadata("schlüssel"), idemgrpc.WithKeyMetadata(":authority")},
			[]string{"empty key metadata", "reserved by gRPC", "binary values", `"idempotency key" is not`, `"schlüssel" is not`, `":authority": names that start with : are HTTP/2 pseudo-headers`}},
		{"nil scope", store, db, []idemgrpc.Option{protected, idemgrpc.WithScope(nil)}, []string{"nil scope"}},
		{"retryable codes", store, db, []idemgrpc.Option{protected, idemgrpc.WithStoredErrors(codes.Unavailable), idemgrpc.WithStoredErrors(codes.OK), idemgrpc.WithStoredErrors(codes.Internal)},
			[]string{"Unavailable is not a final answer", "OK is not", "Internal is not"}},
		{"pushback", store, db, []idemgrpc.Option{protected, idemgrpc.WithRetryPushback(0), idemgrpc.WithRetryPushback(-time.Second)},
			[]string{"must be positive, got 0s", "got -1s"}},
		{"nil hook", store, db, []idemgrpc.Option{protected, idemgrpc.WithErrorHook(nil)}, []string{"nil error hook"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ic, err := idemgrpc.UnaryServerInterceptor(c.store, c.db, nil, c.opts...)
			if len(c.want) == 0 {
				if err != nil || ic == nil {
					t.Fatalf("got %v, %v; want an interceptor", ic != nil, err)
				}
				return
			}
			if err == nil || ic != nil {
				t.Fatalf("got an interceptor: %v, want an error", ic != nil)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestBadConfigurationIsInvalidArgument gives UnaryServerInterceptor one
// bad argument or option at a time, in an otherwise good configuration, so
// that errors.Is sees that one's error wrap idem.ErrInvalidArgument, as the
// Store's own refusals do.
func TestBadConfigurationIsInvalidArgument(t *testing.T) {
	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db := new(sql.DB) // never used: the constructor does not touch the database
	single := idemgrpc.WithSingleClient()
	scope := idemgrpc.WithScope(func(context.Context) (string, error) { return "s", nil })
	filter := idemgrpc.WithMethodFilter(func(string) bool { return true })
	for _, c := range []struct {
		name  string
		store *idem.Store
		db    *sql.DB
		opts  []idemgrpc.Option
	}{
		{"nil store", nil, db, []idemgrpc.Option{protected, single}},
		{"zero store", new(idem.Store), db, []idemgrpc.Option{protected, single}},
		{"nil database", store, nil, []idemgrpc.Option{protected, single}},
		{"no scope chosen", store, db, []idemgrpc.Option{protected}},
		{"scope and single client", store, db, []idemgrpc.Option{protected, single, scope}},
		{"no methods to protect", store, db, []idemgrpc.Option{single}},
		{"methods and a filter", store, db, []idemgrpc.Option{protected, filter, single}},
		{"empty methods", store, db, []idemgrpc.Option{idemgrpc.WithMethods(), filter, single}},
		{"a method name that is not full", store, db, []idemgrpc.Option{idemgrpc.WithMethods("idemgrpc.test.Shop/Place"), filter, single}},
		{"an unknown service", store, db, []idemgrpc.Option{idemgrpc.WithMethods("/idemgrpc.test.Nope/Place"), filter, single}},
		{"not a service", store, db, []idemgrpc.Option{idemgrpc.WithMethods("/idemgrpc.test.Parcel/Place"), filter, single}},
		{"an unknown method", store, db, []idemgrpc.Option{idemgrpc.WithMethods("/idemgrpc.test.Shop/Steal"), filter, single}},
		{"a streaming method", store, db, []idemgrpc.Option{idemgrpc.WithMethods(watchMethod), filter, single}},
		{"nil filter", store, db, []idemgrpc.Option{idemgrpc.WithMethodFilter(nil), protected, single}},
		{"empty key metadata", store, db, []idemgrpc.Option{protected, single, idemgrpc.WithKeyMetadata("")}},
		{"reserved key metadata", store, db, []idemgrpc.Option{protected, single, idemgrpc.WithKeyMetadata("grpc-key")}},
		{"binary key metadata", store, db, []idemgrpc.Option{protected, single, idemgrpc.WithKeyMetadata("key-bin")}},
		{"invalid key metadata", store, db, []idemgrpc.Option{protected, single, idemgrpc.WithKeyMetadata("idempotency key")}},
		{"nil scope", store, db, []idemgrpc.Option{protected, idemgrpc.WithScope(nil)}},
		{"a stored code that is not final", store, db, []idemgrpc.Option{protected, single, idemgrpc.WithStoredErrors(codes.Unavailable)}},
		{"zero pushback", store, db, []idemgrpc.Option{protected, single, idemgrpc.WithRetryPushback(0)}},
		{"nil hook", store, db, []idemgrpc.Option{protected, single, idemgrpc.WithErrorHook(nil)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ic, err := idemgrpc.UnaryServerInterceptor(c.store, c.db, nil, c.opts...)
			if err == nil || ic != nil {
				t.Fatalf("got an interceptor: %v, %v; want an error", ic != nil, err)
			}
			if n := strings.Count(err.Error(), "idemgrpc: "); n != 1 {
				t.Errorf("error %q holds %d errors, want 1, so that errors.Is sees this case's", err, n)
			}
			if !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("error %q does not wrap idem.ErrInvalidArgument", err)
			}
		})
	}
	// UnaryServerInterceptorWithRunner refuses a nil Runner, as the
	// Runners of a nil database are, and a nil store beside a good one.
	for _, c := range []struct {
		name  string
		store *idem.Store
		run   idem.Runner
		want  string
	}{
		{"nil runner", store, nil, "nil runner"},
		{"runner of a nil database", store, idem.SQLRunner(store, nil, nil), "nil runner"},
		{"nil store", nil, idem.SQLRunner(store, db, nil), "nil store"},
	} {
		t.Run("WithRunner/"+c.name, func(t *testing.T) {
			ic, err := idemgrpc.UnaryServerInterceptorWithRunner(c.store, c.run, protected, single)
			if err == nil || ic != nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, idem.ErrInvalidArgument) {
				t.Fatalf("got an interceptor: %v, %v; want ErrInvalidArgument naming the %s", ic != nil, err, c.want)
			}
		})
	}
}

// TestStoredKeyAsIdemhttp pins the stored key to idemhttp's, on which
// docs/grpc.md's promise rests that a key means one request over both.
func TestStoredKeyAsIdemhttp(t *testing.T) {
	for _, c := range [][2]string{{"", "k"}, {"acct_42", "4f9c2b7e-order-1"}, {strings.Repeat("s", 1000), strings.Repeat("k", idemgrpc.MaxClientKeyLength)}} {
		if got, want := idemgrpc.StoredKey(c[0], c[1]), idemhttp.StoredKey(c[0], c[1]); got != want {
			t.Errorf("StoredKey(%q, %q) = %q, idemhttp's is %q", c[0], c[1], got, want)
		}
		if n := len(idemgrpc.StoredKey(c[0], c[1])); n > idem.MaxStoredKeyBytes {
			t.Errorf("StoredKey is %d bytes, more than idem.MaxStoredKeyBytes", n)
		}
	}
}
