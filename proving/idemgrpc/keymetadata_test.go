package idemgrpc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemgrpc"
)

// metadataProbe is a gRPC server on a loopback port, with a client whose
// retry policy retries UNAVAILABLE, that tells whether a metadata name can
// carry a client's value to a server: it sends one call with a value under
// the name, fails the call's first attempt with Unavailable so that the
// client sends a second, and sees what the server got under the name in
// each attempt.
type metadataProbe struct {
	conn *grpc.ClientConn
	mu   sync.Mutex
	seen map[string][][]string // a call's x-probe value: what each attempt got under its name
}

func newMetadataProbe(t *testing.T) *metadataProbe {
	t.Helper()
	p := &metadataProbe{seen: map[string][][]string{}}
	record := func(ctx context.Context, _ any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		probe := strings.Join(md.Get("x-probe"), "") // "name value"
		name, _, _ := strings.Cut(probe, " ")
		p.mu.Lock()
		defer p.mu.Unlock()
		p.seen[probe] = append(p.seen[probe], md.Get(name))
		if len(p.seen[probe]) == 1 {
			return nil, status.Error(codes.Unavailable, "the first attempt fails, so that the client sends a second")
		}
		return &structpb.Struct{}, nil
	}
	p.conn = serve(t, &shop{}, record, grpc.WithDefaultServiceConfig(retryPolicy))
	return p
}

// usable sends value under name in one call of Peek, and returns "" when
// both of its attempts reached the server with exactly that value under
// name, and otherwise what went wrong.
func (p *metadataProbe) usable(name, value string) string {
	probe := name + " " + value
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-probe", probe, name, value)
	if err := p.conn.Invoke(ctx, peekMethod, &structpb.Struct{}, new(structpb.Struct)); err != nil {
		return fmt.Sprintf("the call failed: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	attempts := p.seen[probe]
	if len(attempts) != 2 {
		return fmt.Sprintf("%d attempts reached the server, want 2", len(attempts))
	}
	for i, got := range attempts {
		if len(got) != 1 || got[0] != value {
			return fmt.Sprintf("attempt %d reached the server with %q, not %q", i+1, got, value)
		}
	}
	return ""
}

// TestReservedKeyMetadata tries every metadata name that grpc-go reserves
// or fills in as the key's metadata name, in lower, upper and mixed case:
// UnaryServerInterceptor and UnaryClientInterceptor refuse each with
// idem.ErrInvalidArgument. Each name is shown unusable on a real server
// over loopback (a client's value never arrives as it was sent, in the
// first attempt or in the retry), except where grpc-go's behaviour needs
// a set-up the probe does not make, which the case's reason cites; the
// names that the interceptors take pass the same probe.
func TestReservedKeyMetadata(t *testing.T) {
	p := newMetadataProbe(t)
	for _, name := range []string{idemgrpc.DefaultKeyMetadata, "x-request-key", "order.key_v1"} {
		if why := p.usable(name, "probe-value"); why != "" {
			t.Errorf("%s, a name that the interceptors take: %s", name, why)
		}
	}

	store, err := idem.New(idem.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	db := new(sql.DB) // never used: the constructor does not touch the database
	for _, c := range []struct {
		name string
		// unprobed, when set, says why the probe cannot show the name
		// unusable, from grpc-go's code or gRPC's protocol.
		unprobed string
	}{
		// grpc-go's client never sends an application's value under a
		// pseudo-header, content-type, user-agent or te
		// (http2_client.go, createHeaderFields, isReservedHeader), and
		// its server puts its own :authority, content-type and
		// user-agent in the call's metadata (http2_server.go,
		// operateHeaders).
		{name: ":authority"},
		{name: ":path"},
		{name: "content-type"},
		{name: "user-agent"},
		{name: "te"},
		// The client sends it, and the server drops it beside
		// :authority, which grpc-go's client always sends.
		{name: "host"},
		// A connection-specific header: the server resets the stream.
		{name: "connection"},
		// gRPC's own headers: the client never sends the application's
		// value of the reserved ones, and adds a value of its own to
		// grpc-previous-rpc-attempts on a retry.
		{name: "grpc-timeout"},
		{name: "grpc-encoding"},
		{name: "grpc-status"},
		{name: "grpc-message"},
		{name: "grpc-message-type"},
		{name: "grpc-previous-rpc-attempts"},
		{name: "grpc-accept-encoding", unprobed: "grpc-go's client sends its own value beside the application's once a compressor is registered " +
			"(http2_client.go, createHeaderFields), as importing google.golang.org/grpc/encoding/gzip does; the probe's binary registers none"},
		{name: "grpc-idempotency-key", unprobed: "gRPC's protocol (PROTOCOL-HTTP2.md) reserves every name that starts with grpc- for gRPC's own headers, " +
			"present and future; grpc-go passes this one through today"},
	} {
		t.Run(c.name, func(t *testing.T) {
			why := p.usable(c.name, "probe-value")
			switch {
			case c.unprobed == "" && why == "":
				t.Errorf("the probe got the value through: the name is usable")
			case c.unprobed == "":
				t.Logf("unusable: %s", why)
			default:
				t.Logf("unusable: %s", c.unprobed)
			}
			for _, spelt := range []string{c.name, strings.ToUpper(c.name), mixedCase(c.name)} {
				ic, err := idemgrpc.UnaryServerInterceptor(store, db, nil, protected, idemgrpc.WithSingleClient(), idemgrpc.WithKeyMetadata(spelt))
				if ic != nil || !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.ToLower(spelt))) {
					t.Errorf("WithKeyMetadata(%q): %v; want an error that names it and wraps idem.ErrInvalidArgument", spelt, err)
				}
				cic, err := idemgrpc.UnaryClientInterceptor(idemgrpc.WithClientKeyMetadata(spelt))
				if cic != nil || !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.ToLower(spelt))) {
					t.Errorf("WithClientKeyMetadata(%q): %v; want an error that names it and wraps idem.ErrInvalidArgument", spelt, err)
				}
			}
		})
	}
}

// mixedCase spells name with every other letter in upper case, as
// "UsEr-AgEnT".
func mixedCase(name string) string {
	b := []byte(name)
	for i := 0; i < len(b); i += 2 {
		if b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}
