// Package codec holds the encodings of a stored response that package idem
// writes and package idemtest must reproduce: the header encoding and the
// checksum.
package codec

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"sort"
)

// Checksum is SHA-256 over the key, the request hash and the stored
// response, each framed by its length, so that a response moved to another
// record fails the check as surely as a changed one.
func Checksum(key, requestHash []byte, status int64, header, body []byte) [sha256.Size]byte {
	f := NewFramer()
	f.Write(key)
	f.Write(requestHash)
	binary.BigEndian.PutUint64(f.buf, uint64(status))
	f.h.Write(f.buf)
	f.Write(header)
	f.Write(body)
	var sum [sha256.Size]byte
	copy(sum[:], f.Sum())
	return sum
}

// Framer hashes parts with SHA-256, each framed by its length, so that no
// two sequences of parts hash alike. Its one buffer serves every length
// prefix and the sum, which keeps hashing a response to two allocations.
type Framer struct {
	h   hash.Hash
	buf []byte
}

// NewFramer returns an empty Framer.
func NewFramer() *Framer {
	return &Framer{h: sha256.New(), buf: make([]byte, 8, sha256.Size)}
}

// Write adds the length of p, then p.
func (f *Framer) Write(p []byte) {
	binary.BigEndian.PutUint64(f.buf, uint64(len(p)))
	f.h.Write(f.buf)
	f.h.Write(p)
}

// Sum returns the SHA-256 of what was written, in the Framer's own buffer.
func (f *Framer) Sum() []byte { return f.h.Sum(f.buf[:0]) }

// The header encoding: a version byte, then for each name in sorted order
// the name and its values, every string and count as a uvarint length or
// number. A nil or empty header encodes as no bytes at all.
const headerVersion = 1

var errHeaderEncoding = errors.New("malformed header encoding")

// EncodeHeader encodes h; DecodeHeader reverses it.
func EncodeHeader(h http.Header) []byte {
	if len(h) == 0 {
		return []byte{}
	}
	names := make([]string, 0, len(h))
	size := 1 + binary.MaxVarintLen64
	for name, vals := range h {
		names = append(names, name)
		size += 2*binary.MaxVarintLen64 + len(name)
		for _, v := range vals {
			size += binary.MaxVarintLen64 + len(v)
		}
	}
	sort.Strings(names)
	b := make([]byte, 0, size)
	b = append(b, headerVersion)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		vals := h[name]
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			b = appendString(b, v)
		}
	}
	return b
}

// HeaderSize returns len(EncodeHeader(h)) without encoding h.
func HeaderSize(h http.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := 1 + uvarintLen(len(h))
	for name, vals := range h {
		n += uvarintLen(len(name)) + len(name) + uvarintLen(len(vals))
		for _, v := range vals {
			n += uvarintLen(len(v)) + len(v)
		}
	}
	return n
}

// uvarintLen is the number of bytes binary.AppendUvarint writes for n.
func uvarintLen(n int) int {
	size := 1
	for x := uint64(n); x >= 0x80; x >>= 7 {
		size++
	}
	return size
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeHeader decodes what EncodeHeader wrote, and fails on anything else.
func DecodeHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != headerVersion {
		return nil, fmt.Errorf("%w: version %d", errHeaderEncoding, b[0])
	}
	d := decoder{b: b[1:]}
	n := d.count()
	if n == 0 {
		d.fail("no names") // an empty header encodes as no bytes at all
	}
	h := make(http.Header, min(n, uint64(len(d.b))))
	prev := ""
	for i := uint64(0); i < n && d.err == nil; i++ {
		name := d.string()
		if i > 0 && name <= prev {
			d.fail("names out of order")
		}
		prev = name
		m := d.count()
		vals := make([]string, 0, min(m, uint64(len(d.b))))
		for j := uint64(0); j < m && d.err == nil; j++ {
			vals = append(vals, d.string())
		}
		h[name] = vals
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return h, nil
}

// decoder reads the header encoding, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errHeaderEncoding, why)
	}
	d.b = nil
}

// uvarint reads a uvarint in its shortest form: any other form of the same
// number would decode to a header that encodes differently.
func (d *decoder) uvarint() (uint64, bool) {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || (k > 1 && d.b[k-1] == 0) {
		return 0, false
	}
	d.b = d.b[k:]
	return n, true
}

// count reads a uvarint that counts items, each at least one byte long, so
// it can never exceed what is left.
func (d *decoder) count() uint64 {
	n, ok := d.uvarint()
	if !ok || n > uint64(len(d.b)) {
		d.fail("bad count")
		return 0
	}
	return n
}

func (d *decoder) string() string {
	n, ok := d.uvarint()
	if !ok || n > uint64(len(d.b)) {
		d.fail("bad length")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
