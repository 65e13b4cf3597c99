package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxKeyLength is the longest key a client may send, in characters, after
// unquoting; a key is printable ASCII, so characters are bytes. It is the
// limit that Stripe's API and the IETF draft's examples have made usual.
const MaxKeyLength = 255

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
// as the IETF draft specifies, in which \" and \\ are the only escapes. A
// key is 1 to MaxKeyLength printable ASCII characters (space included, when
// not leading or trailing); anything else, and more than one header line,
// is malformed. present is false when there is no header at all.
func parseKey(values []string) (key string, present bool, err *keyError) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, &keyError{reason: "the header is sent more than once"}
	}
	v := strings.Trim(values[0], " \t")
	if strings.HasPrefix(v, `"`) {
		key, err = unquote(v)
	} else {
		key, err = v, checkKeyChars(v)
	}
	if err != nil {
		return "", true, err
	}
	switch {
	case key == "":
		return "", true, &keyError{reason: "the key is empty"}
	case key[0] == ' ' || key[len(key)-1] == ' ':
		// A quoted key could otherwise differ from another only by
		// spaces that clients and proxies trim without a thought.
		return "", true, &keyError{reason: "the key starts or ends with a space"}
	case len(key) > MaxKeyLength:
		return "", true, &keyError{reason: "the key is longer than 255 characters"}
	}
	return key, true, nil
}

// unquote decodes an sf-string: a quoted string in which \" and \\ stand for
// " and \. Parameters after the closing quote are not accepted: the draft
// defines none.
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
		case c < 0x20 || c > 0x7e:
			return "", &keyError{reason: "the key holds a control or non-ASCII character"}
		default:
			b.WriteByte(c)
		}
	}
	return "", &keyError{reason: "the quoted key has no closing quote"}
}

func checkKeyChars(v string) *keyError {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return &keyError{reason: "the key holds a control or non-ASCII character"}
		}
	}
	return nil
}

// StoredKey returns the key under which the middleware stores a request
// with the client's key key from the client named scope (empty with
// WithSingleClient): the hex SHA-256 of the scope, a colon, and the key.
// Pass it to Store.Lookup to find a client's request; Middleware.Identify
// returns it for a request. Hashing the scope keeps the stored key within
// idem.MaxKeyBytes (at most 320 bytes) however long the scope is, and gives
// every scope its own key space.
func StoredKey(scope, key string) string {
	sum := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(sum[:]) + ":" + key
}
