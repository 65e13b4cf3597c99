package idem

import "github.com/idemgo/idem/internal/codec"

// Fingerprint returns the SHA-256 of parts, each framed by its length, for
// use as the request hash of Do: Fingerprint([]byte("ab"), []byte("c")) and
// Fingerprint([]byte("a"), []byte("bc")) differ. Put in it everything that
// makes two requests different, such as method, path, query, body, and the
// identity of the client.
func Fingerprint(parts ...[]byte) []byte {
	f := codec.NewFramer()
	for _, p := range parts {
		f.Write(p)
	}
	return f.Sum()
}
