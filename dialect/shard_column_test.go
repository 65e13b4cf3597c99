package dialect_test

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/idemgo/idem/dialect"
)

type (
	customerID int64
	tenantID   string
	rawShard   []byte
	uuidArray  [16]byte
)

// TestShardKindValue shows the Go value that the Store binds for what a
// caller gives WithShard, kind by kind, types defined as the kind's own
// included, and what each kind refuses.
func TestShardKindValue(t *testing.T) {
	int64Kind := dialect.ShardKind{Type: dialect.ShardInt64}
	text4 := dialect.ShardKind{Type: dialect.ShardText, MaxBytes: 4}
	bytes2 := dialect.ShardKind{Type: dialect.ShardBytes, MaxBytes: 2}
	uuidKind := dialect.ShardKind{Type: dialect.ShardUUID}
	const u = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	for _, c := range []struct {
		kind dialect.ShardKind
		in   any
		want any
	}{
		{int64Kind, 7, int64(7)},
		{int64Kind, int8(-8), int64(-8)},
		{int64Kind, uint32(math.MaxUint32), int64(math.MaxUint32)},
		{int64Kind, uint64(math.MaxInt64), int64(math.MaxInt64)},
		{int64Kind, customerID(42), int64(42)},
		{text4, "ab", "ab"},
		{text4, "éé", "éé"},
		{text4, tenantID("t-1"), "t-1"},
		{text4, "", ""},
		{bytes2, []byte{0, 1}, []byte{0, 1}},
		{bytes2, rawShard{9}, []byte{9}},
		{bytes2, []byte{}, []byte{}},
		{uuidKind, u, u},
		{uuidKind, "6BA7B810-9DAD-11D1-80B4-00C04FD430C8", u},
		{uuidKind, uuidArray{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}, u},
	} {
		got, err := c.kind.Value(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v.Value(%#v) = %#v, %v; want %#v", c.kind, c.in, got, err, c.want)
		}
	}
	for _, c := range []struct {
		kind dialect.ShardKind
		in   any
	}{
		{int64Kind, "7"}, {int64Kind, 7.0}, {int64Kind, uint64(math.MaxInt64) + 1}, {int64Kind, nil}, {int64Kind, true},
		{text4, "abcde"}, {text4, "ééé"}, {text4, "a\x00"}, {text4, "\xff"}, {text4, []byte("ab")}, {text4, 1},
		{bytes2, []byte{1, 2, 3}}, {bytes2, []byte(nil)}, {bytes2, "ab"}, {bytes2, [2]byte{}},
		{uuidKind, "6ba7b810-9dad-11d1-80b4-00c04fd430c"}, {uuidKind, "6ba7b810x9dad-11d1-80b4-00c04fd430c8"},
		{uuidKind, "6ba7b810-9dad-11d1-80b4-00c04fd430cz"}, {uuidKind, [15]byte{}}, {uuidKind, []byte(u)},
		{dialect.ShardKind{}, 1},
	} {
		if got, err := c.kind.Value(c.in); err == nil {
			t.Errorf("%v.Value(%#v) = %#v, want an error", c.kind, c.in, got)
		}
	}
}

// TestShardKindLockBytes pins the bytes of a record's lock number, which
// a dialect that derives it in SQL must write alike (see
// TestPostgresPairLockMatchesGo): the shard value's length, 4 bytes
// big-endian, its bytes, then the key.
func TestShardKindLockBytes(t *testing.T) {
	key := []byte("k")
	for _, c := range []struct {
		kind  dialect.ShardKind
		value any
		want  []byte
	}{
		{dialect.ShardKind{Type: dialect.ShardInt64}, int64(-2), []byte{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 'k'}},
		{dialect.ShardKind{Type: dialect.ShardText, MaxBytes: 8}, "é", []byte{0, 0, 0, 2, 0xc3, 0xa9, 'k'}},
		{dialect.ShardKind{Type: dialect.ShardBytes, MaxBytes: 8}, []byte{}, []byte{0, 0, 0, 0, 'k'}},
		{dialect.ShardKind{Type: dialect.ShardUUID}, "00000000-0000-0000-0000-0000000000ff",
			append([]byte{0, 0, 0, 16}, append(make([]byte, 15), 0xff, 'k')...)},
	} {
		if got := c.kind.LockBytes(c.value, key); !bytes.Equal(got, c.want) {
			t.Errorf("%v.LockBytes(%#v) = %x, want %x", c.kind, c.value, got, c.want)
		}
	}
}
