// Package clientkey is the rule for the idempotency keys that clients send
// through the adapters, idemhttp and idemgrpc, and the stored key that a
// client's key becomes. It is one package so that the two cannot drift: a
// service that answers the same clients over HTTP and gRPC on one table
// gives a key one meaning, and a call over one with a key that a request
// over the other used is refused as a different request, never run a second
// time. What differs between the adapters stays with them: how a key is read
// from a header or from metadata, and HTTP's quoted form.
package clientkey

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// MaxLength is the longest key a client may send, in characters. A key is
// printable ASCII, so characters are bytes. It is the limit that Stripe's
// API and the IETF draft's examples have made usual. It is not
// idem.MaxStoredKeyBytes, the longest key a Store takes: StoredKey makes a
// key of at most MaxLength characters into one of at most StoredLength
// bytes, within it.
const MaxLength = 255

// StoredLength is the length of the longest key that StoredKey returns: the
// 64 hex digits of the scope's hash, a colon, and MaxLength characters.
const StoredLength = 2*sha256.Size + 1 + MaxLength

// Check returns why key, as the client meant it (after any unquoting), is
// not a client's key, in words written for the client; it returns "" for a
// key of 1 to MaxLength printable ASCII characters (space included) that
// neither starts nor ends with a space. The length is checked before the
// characters, so that a long value costs no scan.
func Check(key string) (reason string) {
	switch {
	case key == "":
		return "the key is empty"
	case len(key) > MaxLength:
		return "the key is longer than " + strconv.Itoa(MaxLength) + " characters"
	}
	for i := 0; i < len(key); i++ {
		if !Printable(key[i]) {
			return "the key holds a control or non-ASCII character"
		}
	}
	if key[0] == ' ' || key[len(key)-1] == ' ' {
		// Keys that differ only by spaces that clients, proxies and
		// logs trim without a thought must not name two requests.
		return "the key starts or ends with a space"
	}
	return ""
}

// Printable reports whether c may be part of a key: printable ASCII, space
// included. Tabs, other control characters, DEL and every byte of a
// non-ASCII character are refused, since a key must read the same in every
// header, log and terminal it passes through.
func Printable(c byte) bool { return c >= 0x20 && c <= 0x7e }

// StoredKey returns the key under which an adapter stores the request with
// the client's key key from the client named scope (empty for a service
// whose keys are global): the hex SHA-256 of the scope, a colon, and the
// key. Hashing the scope keeps the stored key within StoredLength bytes
// however long the scope is, and gives every scope its own key space: no
// scope's hash is another's prefix, since all are 64 digits long.
//
// Records written under a stored key must be found again by every later
// build: its form never changes (TestStoredKeyIsPinned).
func StoredKey(scope, key string) string {
	sum := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(sum[:]) + ":" + key
}
