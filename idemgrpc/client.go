package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/idemgo/idem/idemclient"
)

// A ClientOption configures the interceptor of UnaryClientInterceptor.
type ClientOption func(*clientConfig) error

type clientConfig struct {
	keyName string
	methods map[string]bool // nil: every method
}

// WithClientKeyMetadata sets the metadata key that carries the idempotency
// key; the default is DefaultKeyMetadata, as the server's WithKeyMetadata
// reads it. The name follows WithKeyMetadata's rules, and a name that
// breaks them fails UnaryClientInterceptor, as it fails the server's
// interceptor.
func WithClientKeyMetadata(name string) ClientOption {
	return func(c *clientConfig) error {
		name, err := keyMetadataName(name)
		if err != nil {
			return err
		}
		c.keyName = name
		return nil
	}
}

// WithClientMethods limits the interceptor to the methods with these full
// names ("/package.Service/Method"): the calls of other methods get no
// key. By default every call gets one, which a server that does not
// protect the method ignores.
func WithClientMethods(fullMethods ...string) ClientOption {
	return func(c *clientConfig) error {
		if len(fullMethods) == 0 {
			return errors.New("idemgrpc: no client methods")
		}
		c.methods = make(map[string]bool, len(fullMethods))
		for _, m := range fullMethods {
			if !strings.HasPrefix(m, "/") || strings.Count(m, "/") != 2 {
				return fmt.Errorf("idemgrpc: client method %q is not a full method name, /package.Service/Method", m)
			}
			c.methods[m] = true
		}
		return nil
	}
}

// UnaryClientInterceptor returns an interceptor that gives each call an
// idempotency key, once per call: the key that the call's outgoing
// metadata carries already, or a new one (idemclient.NewKey, at least 128
// random bits) otherwise. grpc-go's retry policy sends every attempt of a
// call with the metadata that the call began with, so that all of them
// carry the same key, and the server does the call's work once however
// many attempts reach it: give the methods a retryPolicy on UNAVAILABLE,
// the code of the server's IN_FLIGHT, CONFLICT, UNFINISHED and
// OUTCOME_UNKNOWN answers, whose pushback the policy honours.
//
// A key made here lives as long as the call: a retry that the application
// makes after the call has failed is a new call, with a new key. To retry
// an intention across calls (or restarts), make its key once, keep it with
// the intention, and put it in the outgoing metadata of each call, which
// the interceptor then leaves as it is.
func UnaryClientInterceptor(opts ...ClientOption) (grpc.UnaryClientInterceptor, error) {
	c := clientConfig{keyName: DefaultKeyMetadata}
	var errs []error
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		if c.methods == nil || c.methods[method] {
			ctx = withKey(ctx, c.keyName)
		}
		return invoker(ctx, method, req, reply, cc, callOpts...)
	}, nil
}

// withKey returns ctx with an idempotency key under keyName in its
// outgoing metadata, unless it has one.
func withKey(ctx context.Context, keyName string) context.Context {
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(keyName)) > 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, keyName, idemclient.NewKey())
}
