package idem

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemgo/idem/dialect"
)

// ShardKind is the kind of a shard column's values (WithShardColumn): an
// int64 (ShardInt64), a text or a byte string of at most a number of bytes
// (ShardText, ShardBytes), or a UUID (ShardUUID). Each built-in dialect
// gives each kind one SQL type that holds its values exactly and compares
// them byte for byte (docs/scaling.md lists them), and the Store checks
// every shard value against the kind before it sends a statement.
type ShardKind = dialect.ShardKind

// ShardInt64 is the kind of a shard column of 64-bit integers, such as a
// bigint customer id: bigint on PostgreSQL, BIGINT on the MySQL family,
// INTEGER on SQLite. WithShard takes any Go integer within int64's range.
func ShardInt64() ShardKind { return ShardKind{Type: dialect.ShardInt64} }

// ShardText is the kind of a shard column of text of at most maxBytes
// bytes of UTF-8 (1 to dialect.MaxShardBytes, 255), compared byte for
// byte, so that "tenant-a", "TENANT-a", "ténant-a" and "tenant-a " are
// four shard values: text on PostgreSQL, VARBINARY(maxBytes) on the MySQL
// family, TEXT on SQLite. WithShard takes a string of valid UTF-8 without
// a NUL byte.
func ShardText(maxBytes int) ShardKind {
	return ShardKind{Type: dialect.ShardText, MaxBytes: maxBytes}
}

// ShardBytes is the kind of a shard column of byte strings of at most
// maxBytes bytes (1 to dialect.MaxShardBytes, 255): bytea on PostgreSQL,
// VARBINARY(maxBytes) on the MySQL family, BLOB on SQLite. WithShard takes
// a []byte.
func ShardBytes(maxBytes int) ShardKind {
	return ShardKind{Type: dialect.ShardBytes, MaxBytes: maxBytes}
}

// ShardUUID is the kind of a shard column of UUIDs: uuid on PostgreSQL,
// BINARY(36) on the MySQL family, which holds the canonical text, TEXT on
// SQLite. WithShard takes a string in the 8-4-4-4-12 form, in either
// case, or 16 bytes in an array, such as github.com/google/uuid's UUID;
// the Store binds, and Unfinished and Identity give, the lower-case
// string.
func ShardUUID() ShardKind { return ShardKind{Type: dialect.ShardUUID} }

// ParseShardKind reads a shard column's kind as ShardKind's String writes
// it, for configuration and the command: "int64", "text(N)", "bytes(N)"
// or "uuid", in any case. Anything else is ErrInvalidArgument.
func ParseShardKind(s string) (ShardKind, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	var k ShardKind
	switch t {
	case "int64":
		k = ShardInt64()
	case "uuid":
		k = ShardUUID()
	default:
		name, rest, ok := strings.Cut(t, "(")
		n, err := strconv.Atoi(strings.TrimSuffix(rest, ")"))
		switch {
		case !ok || !strings.HasSuffix(rest, ")") || err != nil:
			return ShardKind{}, fmt.Errorf("%w: shard kind %q: want int64, text(N), bytes(N) or uuid", ErrInvalidArgument, s)
		case name == "text":
			k = ShardText(n)
		case name == "bytes":
			k = ShardBytes(n)
		default:
			return ShardKind{}, fmt.Errorf("%w: shard kind %q: want int64, text(N), bytes(N) or uuid", ErrInvalidArgument, s)
		}
	}
	if !k.Valid() {
		return ShardKind{}, fmt.Errorf("%w: shard kind %q: N must be 1 to %d", ErrInvalidArgument, s, dialect.MaxShardBytes)
	}
	return k, nil
}

// WithShardColumn gives the Store's table a shard column, shard_key, of
// kind's values, which holds for each record the value that its request's
// effects are sharded by, such as a customer id, so that a sharded
// database can keep the record on the shard of the effect it protects: on
// Vitess, the table's VSchema entry shards it by shard_key with the vindex
// of the effects' column; on Citus, the table is distributed by shard_key
// and co-located with the effects' table (docs/scaling.md). Give the
// effects' column the type that the dialect gives kind where the database
// compares the two, as Citus's co-location and Vitess's vindexes do.
//
// Each call of Do, DoTx, Run and the operators then names its record by
// the shard value in its context (WithShard) and its key: a key is claimed
// once for each shard value, and two shard values may use the same key. A
// call without a shard value, or with one that the column cannot hold
// exactly (of another Go type, too long, out of range, not a UUID), fails
// with ErrInvalidArgument before it sends anything. Where the dialect
// takes locks of its own (the PostgreSQL dialect's), a record's lock is
// its pair's, so that two customers' requests with one key never wait for
// each other. Unfinished carries each request's shard value, and Resume
// puts it in the context of the request's steps.
//
// The default is a table without the column, keyed by the key alone; the
// option makes Migrate create the table with the column, and check that a
// table that was there has it, of kind's type. It does not convert a
// table: docs/operations.md, "Moving a table to a shard column", gives the
// steps. It needs a dialect that implements dialect.ShardColumn, as the
// built-in ones do.
func WithShardColumn(kind ShardKind) Option {
	return func(c *config) error {
		if !kind.Valid() {
			return fmt.Errorf("%w: shard column of kind %v: want ShardInt64, ShardUUID, or ShardText or ShardBytes of 1 to %d bytes", ErrInvalidArgument, kind, dialect.MaxShardBytes)
		}
		c.shardKind = kind
		return nil
	}
}

// shardKey is the context key of WithShard's value.
type shardKey struct{}

// WithShard returns a copy of ctx that carries the shard value of the
// requests made with it: the value of the shard column (WithShardColumn)
// of the records that Do, DoTx, Run and the operators read and write under
// ctx. Its Go type is one that the column's kind takes (ShardKind.Value):
// any Go integer within int64's range for ShardInt64, a string for
// ShardText, a []byte for ShardBytes, a string or 16 bytes in an array for
// ShardUUID, or a type defined as one of those, such as a type TenantID
// string. The Store checks it and binds it as the kind's one Go value, in
// every statement alike; a value that the column cannot hold exactly is
// ErrInvalidArgument before anything is sent. A middleware that knows the
// customer, in front of idemhttp's or idemgrpc's, sets it in the request's
// context.
//
// A Store without a shard column ignores it.
func WithShard(ctx context.Context, value any) context.Context {
	return context.WithValue(ctx, shardKey{}, value)
}

// ShardFrom returns the shard value that WithShard put in ctx, and whether
// there is one, such as the value that Resume puts in the context of an
// unfinished request's steps.
func ShardFrom(ctx context.Context) (any, bool) {
	v := ctx.Value(shardKey{})
	return v, v != nil
}

// sharded reports whether the Store's table has a shard column.
func (s *Store) sharded() bool { return s.shardKind.Type != 0 }

// shardOf returns the shard value of a call with ctx, as the Store binds
// it (ShardKind.Value): nil for a Store without a shard column, and
// ErrInvalidArgument for a Store with one when ctx has none, or one that
// the column cannot hold exactly.
func (s *Store) shardOf(ctx context.Context) (any, error) {
	if !s.sharded() {
		return nil, nil
	}
	v, ok := ShardFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: the Store's table has a shard column and the context has no shard value: set it with idem.WithShard", ErrInvalidArgument)
	}
	b, err := s.shardKind.Value(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return b, nil
}

// scannedShard is a shard value v as the driver scanned it from the
// column, as the Store binds it: drivers read a binary column, and some a
// number or a uuid, as bytes.
func (s *Store) scannedShard(v any) (any, error) {
	switch s.shardKind.Type {
	case dialect.ShardInt64:
		switch b := v.(type) {
		case []byte:
			v = string(b)
		}
		if t, ok := v.(string); ok {
			n, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("shard_key %q is not an int64: %w", t, err)
			}
			v = n
		}
	case dialect.ShardText:
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
	case dialect.ShardBytes:
		// The column is NOT NULL: a driver may read an empty byte
		// string as nil.
		switch t := v.(type) {
		case string:
			v = []byte(t)
		case nil:
			v = []byte{}
		case []byte:
			if t == nil {
				v = []byte{}
			}
		}
	case dialect.ShardUUID:
		if b, ok := v.([]byte); ok {
			if len(b) == 16 {
				v = [16]byte(b)
			} else {
				v = string(b)
			}
		}
	}
	return s.shardKind.Value(v)
}

// binder is the binder of the Store's statements.
func (s *Store) binder() binder {
	return binder{d: s.d, sharded: s.sharded()}
}

// tableStatements returns d's schema and statements of the table that c
// describes: with a shard column when c has one, which needs a dialect
// that can make it.
func tableStatements(d Dialect, c config) ([]string, dialect.Statements, error) {
	if c.shardKind.Type == 0 {
		return d.Schema(c.table), d.Statements(c.table, c.lockTimeout), nil
	}
	sc, ok := d.(dialect.ShardColumn)
	if !ok {
		return nil, dialect.Statements{}, fmt.Errorf("%w: %s dialect has no table with a shard column (dialect.ShardColumn)", ErrInvalidArgument, d.Name())
	}
	return sc.ShardColumnSchema(c.table, c.shardKind), sc.ShardColumnStatements(c.table, c.shardKind, c.lockTimeout), nil
}

// checkShardBound makes sure that, in a table with a shard column, every
// statement that names a record by its key names it by its shard value too:
// a statement with the key alone would read or write the records of every
// shard value, and, on a sharded database, every shard.
func (s *Store) checkShardBound(named map[string]*statement) error {
	if !s.sharded() {
		return nil
	}
	for what, st := range named {
		if st.uses(paramKey) && !st.uses(paramShard) {
			return fmt.Errorf("%w: %s dialect: the %s statement binds {key} and not {shard}", ErrInvalidArgument, s.d.Name(), what)
		}
	}
	return nil
}
