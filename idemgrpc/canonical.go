package idemgrpc

import (
	"bytes"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// canonicalEncoding returns the encoding of a request that its fingerprint
// covers: protobuf's deterministic encoding, with the unknown fields of the
// request, and of every message within its known fields, sorted by their
// encoding (tag, then value).
//
// The deterministic encoding writes the known fields in one order, maps
// sorted by key, but keeps the unknown fields, those of a newer definition
// of the message than the server's, as they arrived. A newer client writes
// them in an order of its own, which need not be the same from one
// encoding to the next: Go's protobuf writes a map's entries in a random
// order. Without the sort, the retry of such a call would be refused as
// another call. Sorting keeps every unknown field in the fingerprint, so a
// call that differs in one's value, or has one more or one less, is still
// another call. What it gives up: the wire does not tell an unknown map
// from an unknown repeated field, whose order counts, so two calls that
// differ only in the order of an unknown repeated field's elements are one
// call.
//
// The fingerprint's version stays: a request without unknown fields, or
// with them in sorted order, is encoded byte for byte as before the sort,
// and a record stored before it can match no call but one that is its own
// request with the unknown fields in another order. The retry of a call
// stored before, whose unknown fields did not come in sorted order, is
// refused as another call, as a retry that reaches a server built
// otherwise may be; it never runs twice.
func canonicalEncoding(msg proto.Message) ([]byte, error) {
	deterministic := proto.MarshalOptions{Deterministic: true}
	if eachMessage(msg.ProtoReflect(), func(m protoreflect.Message) bool { return len(m.GetUnknown()) == 0 }) {
		return deterministic.Marshal(msg)
	}
	msg = proto.Clone(msg) // the handler gets the request as it arrived
	var err error
	eachMessage(msg.ProtoReflect(), func(m protoreflect.Message) bool {
		var sorted protoreflect.RawFields
		if sorted, err = sortFields(m.GetUnknown()); err != nil {
			err = fmt.Errorf("the unknown fields of %s: %w", m.Descriptor().FullName(), err)
			return false
		}
		m.SetUnknown(sorted)
		return true
	})
	if err != nil {
		return nil, err
	}
	return deterministic.Marshal(msg)
}

// eachMessage calls f on m and on each message within m's fields, depth
// first, until f returns false, and returns false if it did.
func eachMessage(m protoreflect.Message, f func(protoreflect.Message) bool) bool {
	if !f(m) {
		return false
	}
	ok := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					ok = eachMessage(mv.Message(), f)
					return ok
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i, l := 0, v.List(); ok && i < l.Len(); i++ {
					ok = eachMessage(l.Get(i).Message(), f)
				}
			}
		case fd.Message() != nil:
			ok = eachMessage(v.Message(), f)
		}
		return ok
	})
	return ok
}

// sortFields returns the fields of raw, an encoding of fields, sorted by
// their encoding, tag and value, so that any order of the same fields
// gives the same bytes.
func sortFields(raw protoreflect.RawFields) (protoreflect.RawFields, error) {
	var fields [][]byte
	for b := []byte(raw); len(b) > 0; {
		_, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		fields = append(fields, b[:n])
		b = b[n:]
	}
	if slices.IsSortedFunc(fields, bytes.Compare) {
		return raw, nil
	}
	slices.SortFunc(fields, bytes.Compare)
	return bytes.Join(fields, nil), nil
}
