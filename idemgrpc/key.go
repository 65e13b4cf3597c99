package idemgrpc

import "github.com/idemgo/idem/internal/clientkey"

// MaxClientKeyLength is the longest key a client may send, in characters. A
// key is printable ASCII, so characters are bytes. It is the limit of
// package idemhttp, so that one key fits both. It is not
// idem.MaxStoredKeyBytes: StoredKey makes the longest client key, under any
// scope, into a stored key of 320 bytes, within that limit.
const MaxClientKeyLength = clientkey.MaxLength

// keyError says why a key is malformed; the reason is written for the
// client, in the InvalidArgument status.
type keyError struct{ reason string }

func (e *keyError) Error() string { return "idemgrpc: malformed idempotency key: " + e.reason }

// parseKey reads the key from the values of the key's metadata entry. A key
// is sent in exactly one value, and passes the rule that idemhttp shares
// (clientkey.Check): 1 to MaxClientKeyLength printable ASCII characters
// (space included, when not leading or trailing); anything else is
// malformed. The key is taken as it was sent: unlike an HTTP header, a
// metadata value has no quoted form, so quotes are part of the key, and no
// spaces around it are trimmed. present is false when the entry is missing.
func parseKey(values []string) (key string, present bool, err *keyError) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, &keyError{"the key is sent more than once"}
	}
	if reason := clientkey.Check(values[0]); reason != "" {
		return "", true, &keyError{reason}
	}
	return values[0], true, nil
}

// StoredKey returns the key under which the interceptor stores a call with
// the client's key key from the client named scope (empty without
// WithScope): the hex SHA-256 of the scope, a colon, and the key. Pass it
// to Store.Lookup to find a client's call. Hashing the scope keeps the
// stored key within idem.MaxStoredKeyBytes (at most 320 bytes) however long
// the scope is, and gives every scope its own key space.
//
// It is the stored key of package idemhttp as well, so that a service that
// answers the same clients over HTTP and gRPC on one table gives a key one
// meaning: a call over one with a key that a request over the other used is
// refused as a different request, never run a second time.
func StoredKey(scope, key string) string { return clientkey.StoredKey(scope, key) }
