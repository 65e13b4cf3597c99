package idemhttp

import (
	"strings"

	"github.com/idemgo/idem/internal/clientkey"
)

// MaxClientKeyLength is the longest key a client may send, in characters,
// after unquoting; a key is printable ASCII, so characters are bytes. It is
// the limit that Stripe's API and the IETF draft's examples have made usual,
// and that of package idemgrpc, so that one key fits both. It is not
// idem.MaxStoredKeyBytes: StoredKey makes the longest client key, under any
// scope, into a stored key of 320 bytes, within that limit.
const MaxClientKeyLength = clientkey.MaxLength

// keyError says why a key header is malformed; the reason is written for
// the client, in the 400 response. refused is the error of the API's key
// validator, when it is the validator that refused the key.
type keyError struct {
	reason  string
	refused error
}

func (e *keyError) Error() string { return "idemhttp: malformed idempotency key: " + e.reason }
func (e *keyError) Unwrap() error { return e.refused }

// parseKey reads the key from the values of the key header. It accepts a
// plain token, as most clients send, and the quoted sf-string of RFC 8941,
// as the IETF draft specifies, in which \" and \\ are the only escapes. The
// key, unquoted, must then pass the rule that idemgrpc shares
// (clientkey.Check): 1 to MaxClientKeyLength printable ASCII characters
// (space included, when not leading or trailing); anything else, and more
// than one header line, is malformed. The spaces and tabs around the
// header's value are not the key's: HTTP trims them. present is false when
// there is no header at all.
func parseKey(values []string) (key string, present bool, err *keyError) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, &keyError{reason: "the header is sent more than once"}
	}
	key = strings.Trim(values[0], " \t")
	if strings.HasPrefix(key, `"`) {
		if key, err = unquote(key); err != nil {
			return "", true, err
		}
	}
	if reason := clientkey.Check(key); reason != "" {
		return "", true, &keyError{reason: reason}
	}
	return key, true, nil
}

// unquote decodes an sf-string: a quoted string in which \" and \\ stand for
// " and \. Parameters after the closing quote are not accepted: the draft
// defines none. A control or non-ASCII character ends the decoding: an
// sf-string cannot hold one.
func unquote(v string) (string, *keyError) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			if i != len(v)-1 {
				return "", &keyError{reason: "characters follow the closing quote"}
			}
			return b.String(), nil
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", &keyError{reason: `a backslash in a quoted key must escape " or \`}
			}
			b.WriteByte(v[i])
		case !clientkey.Printable(c):
			return "", &keyError{reason: "the key holds a control or non-ASCII character"}
		default:
			b.WriteByte(c)
		}
	}
	return "", &keyError{reason: "the quoted key has no closing quote"}
}

// StoredKey returns the key under which the middleware stores a request
// with the client's key key from the client named scope (empty with
// WithSingleClient): the hex SHA-256 of the scope, a colon, and the key.
// Pass it to Store.Lookup to find a client's request; Middleware.Identify
// returns it for a request. Hashing the scope keeps the stored key within
// idem.MaxStoredKeyBytes (at most 320 bytes) however long the scope is, and
// gives every scope its own key space. It is idemgrpc's StoredKey too, so
// that a key means one request over both on one table.
func StoredKey(scope, key string) string { return clientkey.StoredKey(scope, key) }
