package dialect

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ShardColumn is an optional interface of a Dialect whose table can carry a
// shard column (idem.WithShardColumn): shard_key, the value that the
// caller's effects are sharded by, such as a customer id, set by the caller
// for each request. On a sharded database, idem's table is then sharded by
// shard_key rather than by key, so that a record lands on the shard of the
// effect it protects and the two commit in one transaction on one shard.
// The built-in dialects implement it.
//
// The table has the columns of Statements and shard_key, NOT NULL, before
// key; its primary key is (shard_key, key), so that a key is claimed once
// for each shard value. The column's type is the one that the dialect gives
// the kind of its values (ShardKind), and holds every value of that kind
// exactly, so that no statement converts one: two shard values are one
// record's only when their bytes are equal.
type ShardColumn interface {
	// ShardColumnSchema is Schema for such a table, whose shard_key
	// holds values of kind. The sharded database's own step, such as a
	// Vitess VSchema entry or Citus's create_distributed_table, is not
	// among them: an operator runs it once (docs/scaling.md).
	ShardColumnSchema(table string, kind ShardKind) []string

	// ShardColumnStatements is Statements for such a table. Every
	// statement that binds {key} binds {shard} too, the value of
	// shard_key, and names the record by both; the inserts write it.
	// The Store binds {shard} as the kind's Go value (see ShardKind),
	// checked to fit the column, and the statements compare and write
	// it without a conversion that could change it: no cast to a
	// narrower type, no parameter of a procedure that rounds or cuts.
	// A dialect whose claim takes a lock of its own ({lock_id}) takes
	// the one of the pair, which the Store derives from both (see
	// ShardKind.LockBytes). PurgeSelect returns two columns, shard_key and
	// key, and PurgeDelete's {keys} is a list of (shard_key, key) pairs,
	// each written ({shard}, {key}) by the Store: (shard_key, key) IN
	// ({keys}). Run.Unfinished and Run.Resumable return shard_key
	// before their other columns.
	ShardColumnStatements(table string, kind ShardKind, lockTimeout time.Duration) Statements

	// ShardColumnCheck returns a query of one row of two numbers about
	// table: how many columns named shard_key it has (0 or 1), and how
	// many of them have the type that holds kind; and that type, as the
	// dialect writes it, for the message of a table that lacks it.
	// Migrate runs it on a table that was there already, and refuses a
	// table whose column is missing or of another type, before any
	// request meets it.
	ShardColumnCheck(table string, kind ShardKind) (query, sqlType string)
}

// ShardType is the type of the values of a shard column: what the Store
// binds, and what the column must hold exactly.
type ShardType uint8

// The types of shard values. The Go value that the Store binds for each,
// whatever the caller gave idem.WithShard, is:
const (
	ShardInt64 ShardType = iota + 1 // an int64
	ShardText                       // a string of valid UTF-8 without NUL, compared byte for byte
	ShardBytes                      // a []byte
	ShardUUID                       // a string in the canonical form, lower case: 8-4-4-4-12 hex digits
)

// MaxShardBytes bounds the most bytes of a text or bytes shard column
// (ShardKind.MaxBytes): with the longest key, the pair stays within the
// size of an index entry on every built-in database.
const MaxShardBytes = 255

// ShardKind describes the values of a shard column.
type ShardKind struct {
	Type ShardType
	// MaxBytes is the most bytes of a ShardText or ShardBytes value,
	// from 1 to MaxShardBytes; 0 for the others.
	MaxBytes int
}

// String writes kind as idem.ParseShardKind reads it: "int64",
// "text(64)", "bytes(16)" or "uuid".
func (k ShardKind) String() string {
	switch k.Type {
	case ShardInt64:
		return "int64"
	case ShardText:
		return "text(" + strconv.Itoa(k.MaxBytes) + ")"
	case ShardBytes:
		return "bytes(" + strconv.Itoa(k.MaxBytes) + ")"
	case ShardUUID:
		return "uuid"
	}
	return fmt.Sprintf("ShardKind{%d, %d}", k.Type, k.MaxBytes)
}

// Valid reports whether kind is one of the kinds above, with a MaxBytes
// that fits it.
func (k ShardKind) Valid() bool {
	switch k.Type {
	case ShardInt64, ShardUUID:
		return k.MaxBytes == 0
	case ShardText, ShardBytes:
		return 1 <= k.MaxBytes && k.MaxBytes <= MaxShardBytes
	}
	return false
}

// Value returns the Go value of kind that the Store binds for v, the
// value that the caller gave idem.WithShard (see ShardType), or an error
// that says why the column could not hold v exactly: a value of another
// Go type, a text or byte string longer than MaxBytes, a text that is not
// valid UTF-8 or holds a NUL byte, a string that is not a UUID. Types
// defined as the kind's, such as a type CustomerID int64 or a type
// TenantID string, are taken as it. An int64 column takes any Go integer
// within its range; a UUID column takes a string in the 8-4-4-4-12 form,
// in either case, or 16 bytes in an array, such as the UUID type of
// github.com/google/uuid, and binds the string in lower case.
func (k ShardKind) Value(v any) (any, error) {
	switch k.Type {
	case ShardInt64:
		return int64Value(v)
	case ShardText:
		s, ok := stringOf(v)
		switch {
		case !ok:
			return nil, fmt.Errorf("a shard value of type %T for a %v column, want a string", v, k)
		case len(s) > k.MaxBytes:
			return nil, fmt.Errorf("a shard value of %d bytes for a %v column", len(s), k)
		case !utf8.ValidString(s):
			return nil, fmt.Errorf("a shard value %q that is not valid UTF-8", s)
		case strings.IndexByte(s, 0) >= 0:
			return nil, fmt.Errorf("a shard value %q with a NUL byte, which PostgreSQL's text cannot hold", s)
		}
		return s, nil
	case ShardBytes:
		r := reflect.ValueOf(v)
		switch {
		case r.Kind() != reflect.Slice || r.Type().Elem().Kind() != reflect.Uint8:
			return nil, fmt.Errorf("a shard value of type %T for a %v column, want a []byte", v, k)
		case r.IsNil():
			return nil, fmt.Errorf("a nil shard value")
		case r.Len() > k.MaxBytes:
			return nil, fmt.Errorf("a shard value of %d bytes for a %v column", r.Len(), k)
		}
		return bytes.Clone(r.Bytes()), nil
	case ShardUUID:
		return uuidValue(v, k)
	}
	return nil, fmt.Errorf("a shard column of kind %v, which is none of the kinds", k)
}

// stringOf is v as a string, where v is one or of a type defined as one,
// such as a type TenantID string.
func stringOf(v any) (string, bool) {
	r := reflect.ValueOf(v)
	if r.Kind() != reflect.String {
		return "", false
	}
	return r.String(), true
}

// int64Value is v, a Go integer, as an int64.
func int64Value(v any) (any, error) {
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return r.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := r.Uint(); u <= math.MaxInt64 {
			return int64(u), nil
		}
		return nil, fmt.Errorf("a shard value %v beyond an int64 column's range", v)
	}
	return nil, fmt.Errorf("a shard value of type %T for an int64 column, want a Go integer", v)
}

// uuidValue is v, a UUID as a string or 16 bytes in an array, in the
// canonical form.
func uuidValue(v any, k ShardKind) (any, error) {
	if s, ok := stringOf(v); ok {
		if _, ok := parseUUID(s); !ok {
			return nil, fmt.Errorf("a shard value %q that is not a UUID (8-4-4-4-12 hex digits)", s)
		}
		return strings.ToLower(s), nil
	}
	r := reflect.ValueOf(v)
	if r.Kind() != reflect.Array || r.Len() != 16 || r.Type().Elem().Kind() != reflect.Uint8 {
		return nil, fmt.Errorf("a shard value of type %T for a %v column, want a string or a [16]byte", v, k)
	}
	var u [16]byte
	reflect.Copy(reflect.ValueOf(u[:]), r)
	return FormatUUID(u), nil
}

// FormatUUID writes u in the canonical form of a UUID shard value.
func FormatUUID(u [16]byte) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&15])
	}
	return string(b)
}

// LockID is the lock number of the bytes b of a record (the key, or
// ShardKind.LockBytes) that the Store binds as {lock_id}: the first 8
// bytes of their SHA-256, big-endian, as a signed number, the same in
// every process.
func LockID(b []byte) int64 {
	sum := sha256.Sum256(b)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// LockBytes writes the bytes from which the Store derives the lock
// number ({lock_id}) of a record of a table with a shard column, for
// value, the Go value of k (see Value), and the key: the shard value's
// bytes (an int64 big-endian in 8 bytes, a text's UTF-8, a byte string as
// it is, a UUID's 16 bytes) after their length as 4 bytes big-endian, then
// the key. The lock number is theirs (LockID), as a key's alone is in a
// table without the column; a dialect that derives it in SQL, as the PostgreSQL
// dialect's Purge does, writes the same bytes.
func (k ShardKind) LockBytes(value any, key []byte) []byte {
	var b []byte
	switch v := value.(type) {
	case int64:
		b = binary.BigEndian.AppendUint64(nil, uint64(v))
	case string:
		if u, ok := parseUUID(v); ok && k.Type == ShardUUID {
			b = u[:]
		} else {
			b = []byte(v)
		}
	case []byte:
		b = v
	}
	out := make([]byte, 0, 4+len(b)+len(key))
	out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
	out = append(out, b...)
	return append(out, key...)
}

// parseUUID reads a UUID in the 8-4-4-4-12 form, in either case.
func parseUUID(s string) ([16]byte, bool) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	j := 0
	for i := 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		h, ok := hexDigit(s[i])
		if !ok {
			return u, false
		}
		l, ok := hexDigit(s[i+1])
		if !ok {
			return u, false
		}
		u[j] = h<<4 | l
		j++
		i++
	}
	return u, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// The built-in dialects can carry a shard column.
var (
	_ ShardColumn = postgres{}
	_ ShardColumn = mysql{}
	_ ShardColumn = mariadb{}
	_ ShardColumn = tidb{}
	_ ShardColumn = vitess{}
	_ ShardColumn = sqlite{}
)
