package idem

import (
	"bytes"
	"fmt"

	"github.com/idemgo/idem/internal/codec"
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
	token       int64 // the claim that wrote it; 0 before tokens were stored
	// incarnation is the record's incarnation (Result.Incarnation); 0
	// before incarnations were stored, or where the dialect has none.
	incarnation int64
}

// live reports whether the record still counts at now (microseconds).
func (r *record) live(now int64) bool { return now < r.expiresAt }

// response decodes and verifies the stored response of a finished record.
func (r *record) response(key []byte) (Response, error) {
	sum := codec.Checksum(key, r.requestHash, r.status, r.header, r.body)
	if !bytes.Equal(sum[:], r.checksum) {
		return Response{}, fmt.Errorf("%w: checksum does not match", ErrCorruptRecord)
	}
	h, err := codec.DecodeHeader(r.header)
	if err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	body := r.body
	if body == nil {
		body = []byte{}
	}
	return Response{Status: int(r.status), Header: h, Body: body}, nil
}
