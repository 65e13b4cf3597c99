package idemgrpc

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxKeyLength is the longest key a client may send, in characters. A key
// is printable ASCII, so characters are bytes. It is the limit of package
// idemhttp, so that one key fits both.
const MaxKeyLength = 255

// keyError says why a key is malformed; the reason is written for the
// client, in the InvalidArgument status.
type keyError struct{ reason string }

func (e *keyError) Error() string { return "idemgrpc: malformed idempotency key: " + e.reason }

// parseKey reads the key from the values of the key's metadata entry. A key
// is 1 to MaxKeyLength printable ASCII characters (space included, when not
// leading or trailing), sent in exactly one value; anything else is
// malformed. The key is taken as it was sent: unlike an HTTP header, a
// metadata value has no quoted form, so quotes are part of the key. present
// is false when the entry is missing.
func parseKey(values []string) (key string, present bool, err *keyError) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, &keyError{"the key is sent more than once"}
	}
	key = values[0]
	switch {
	case key == "":
		return "", true, &keyError{"the key is empty"}
	case len(key) > MaxKeyLength:
		return "", true, &keyError{"the key is longer than 255 characters"}
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return "", true, &keyError{"the key holds a control or non-ASCII character"}
		}
	}
	if key[0] == ' ' || key[len(key)-1] == ' ' {
		// Keys that differ only by spaces that clients, proxies and
		// logs trim without a thought must not name two requests.
		return "", true, &keyError{"the key starts or ends with a space"}
	}
	return key, true, nil
}

// StoredKey returns the key under which the interceptor stores a call with
// the client's key key from the client named scope (empty without
// WithScope): the hex SHA-256 of the scope, a colon, and the key. Pass it
// to Store.Lookup to find a client's call. Hashing the scope keeps the
// stored key within idem.MaxKeyBytes (at most 320 bytes) however long the
// scope is, and gives every scope its own key space.
//
// It is the stored key of package idemhttp as well, so that a service that
// answers the same clients over HTTP and gRPC on one table gives a key one
// meaning: a call over one with a key that a request over the other used is
// refused as a different request, never run a second time.
func StoredKey(scope, key string) string {
	sum := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(sum[:]) + ":" + key
}
