package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"sort"
)

// record is one row of the table as a claim or a lookup sees it.
type record struct {
	requestHash []byte
	finished    bool // the claim completed: status holds a response
	status      int64
	header      []byte
	body        []byte
	checksum    []byte
	createdAt   int64
	expiresAt   int64
}

// live reports whether the record still counts at now (microseconds).
func (r *record) live(now int64) bool { return now < r.expiresAt }

// response decodes and verifies the stored response of a finished record.
func (r *record) response(key []byte) (Response, error) {
	sum := responseChecksum(key, r.requestHash, r.status, r.header, r.body)
	if !bytes.Equal(sum[:], r.checksum) {
		return Response{}, fmt.Errorf("%w: checksum does not match", ErrCorruptRecord)
	}
	h, err := decodeHeader(r.header)
	if err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	body := r.body
	if body == nil {
		body = []byte{}
	}
	return Response{Status: int(r.status), Header: h, Body: body}, nil
}

// responseChecksum is SHA-256 over the key, the request hash and the stored
// response, each framed by its length, so that a response moved to another
// record fails the check as surely as a changed one.
func responseChecksum(key, requestHash []byte, status int64, header, body []byte) [sha256.Size]byte {
	h := sha256.New()
	writeFramed(h, key)
	writeFramed(h, requestHash)
	var st [8]byte
	binary.BigEndian.PutUint64(st[:], uint64(status))
	h.Write(st[:])
	writeFramed(h, header)
	writeFramed(h, body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func writeFramed(h hash.Hash, p []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	h.Write(n[:])
	h.Write(p)
}

// Fingerprint returns the SHA-256 of parts, each framed by its length, for
// use as the request hash of Do: Fingerprint([]byte("ab"), []byte("c")) and
// Fingerprint([]byte("a"), []byte("bc")) differ. Put in it everything that
// makes two requests different, such as method, path, query, body, and the
// identity of the client.
func Fingerprint(parts ...[]byte) []byte {
	h := sha256.New()
	for _, p := range parts {
		writeFramed(h, p)
	}
	return h.Sum(nil)
}

// The header encoding: a version byte, then for each name in sorted order
// the name and its values, every string and count as a uvarint length or
// number. A nil or empty header encodes as no bytes at all.
const headerVersion = 1

var errHeaderEncoding = errors.New("malformed header encoding")

func encodeHeader(h http.Header) []byte {
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

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func decodeHeader(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != headerVersion {
		return nil, fmt.Errorf("%w: version %d", errHeaderEncoding, b[0])
	}
	d := decoder{b: b[1:]}
	n := d.count()
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

// count reads a uvarint that counts items, each at least one byte long, so
// it can never exceed what is left.
func (d *decoder) count() uint64 {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.fail("bad count")
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) string() string {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.fail("bad length")
		return ""
	}
	s := string(d.b[k : k+int(n)])
	d.b = d.b[k+int(n):]
	return s
}
