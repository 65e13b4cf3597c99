package idemgrpc

import (
	"fmt"
	"strings"

	"github.com/idemgo/idem"
)

// unusableMetadata are the metadata names, besides those that start with
// "grpc-" or ":", under which a value that a client sends never reaches a
// grpc-go server as it was sent, each with the reason. A key under one of
// them would be no key at all (the server would run a lost response's
// retry a second time) or one key for every call (the server would answer
// a new call with another call's reply). TestReservedKeyMetadata shows each
// on a real server.
var unusableMetadata = map[string]string{
	"content-type": "grpc-go's client never sends an application's value under it, and its server puts the call's own content type there",
	"user-agent":   "grpc-go's client never sends an application's value under it, and its server puts the client's user agent there, the same in every call",
	"te":           "grpc-go's client never sends an application's value under it, and its server drops it",
	"host":         "grpc-go's server drops it beside :authority, which grpc-go's client always sends",
	"connection":   "it is a connection-specific header, which makes grpc-go's server reset the call",
}

// keyMetadataName returns name, in lower case, as gRPC compares metadata
// names, if it can carry an idempotency key, and otherwise an error that
// wraps idem.ErrInvalidArgument. WithKeyMetadata and WithClientKeyMetadata
// both ask it, so that a client and a server never disagree on a name.
//
// A name must be a valid metadata name (ASCII letters, digits, '-', '_'
// and '.'), a text one (a name that ends in "-bin" carries binary
// values), and one that gRPC leaves to the application: not an HTTP/2
// pseudo-header (":authority"), not one of gRPC's own ("grpc-...", which
// gRPC's protocol reserves, present and future), and not one that grpc-go
// sends, drops or fills in itself (unusableMetadata).
func keyMetadataName(name string) (string, error) {
	name = strings.ToLower(name)
	switch {
	case name == "":
		return "", fmt.Errorf("idemgrpc: empty key metadata name: %w", idem.ErrInvalidArgument)
	case strings.HasPrefix(name, ":"):
		return "", fmt.Errorf("idemgrpc: key metadata %q: names that start with : are HTTP/2 pseudo-headers, which gRPC fills in itself: %w", name, idem.ErrInvalidArgument)
	case strings.HasPrefix(name, "grpc-"):
		return "", fmt.Errorf("idemgrpc: key metadata %q: keys that start with grpc- are reserved by gRPC: %w", name, idem.ErrInvalidArgument)
	case strings.HasSuffix(name, "-bin"):
		return "", fmt.Errorf("idemgrpc: key metadata %q: a key that ends in -bin carries binary values, and a key is text: %w", name, idem.ErrInvalidArgument)
	case unusableMetadata[name] != "":
		return "", fmt.Errorf("idemgrpc: key metadata %q: reserved by gRPC: %s: %w", name, unusableMetadata[name], idem.ErrInvalidArgument)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", fmt.Errorf("idemgrpc: key metadata %q is not a valid metadata key: %w", name, idem.ErrInvalidArgument)
		}
	}
	return name, nil
}
