package idem

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemgo/idem/dialect"
)

// WithShardColumn gives the Store's table a shard column, shard_key of SQL
// type sqlType, which holds for each record the value that its request's
// effects are sharded by, such as a customer id, so that a sharded
// database can keep the record on the shard of the effect it protects: on
// Vitess, the table's VSchema entry shards it by shard_key with the vindex
// of the effects' column; on Citus, the table is distributed by shard_key
// and co-located with the effects' table (docs/scaling.md). sqlType must be
// the type of the effects' column where the database compares the two, as
// Citus's co-location does: "bigint" for a bigint customer id.
//
// Each call of Do, DoTx, Run and the operators then names its record by
// the shard value in its context (WithShard) and its key, and a call
// without one fails with ErrInvalidArgument: a key is claimed once for each
// shard value, and two shard values may use the same key. Records of one
// key under different shard values share the key's lock where the dialect
// has locks of its own (the PostgreSQL dialect's): a request for one may
// answer InFlight while a request for the other runs, as if it were the
// same. Unfinished carries each request's shard value, and Resume puts it
// in the context of the request's steps.
//
// The default is a table without the column, keyed by the key alone; the
// option makes Migrate create the table with the column, and does not
// change a table that is there already. It needs a dialect that
// implements dialect.ShardColumn, as the built-in ones do. sqlType is
// written into the table's definition as it is, so it may hold only
// letters, digits, spaces, underscores, parentheses and commas, such as
// "BIGINT", "varchar(64)" or "uuid".
func WithShardColumn(sqlType string) Option {
	return func(c *config) error {
		if err := validateShardType(sqlType); err != nil {
			return err
		}
		c.shardType = sqlType
		return nil
	}
}

// maxShardTypeBytes bounds the SQL type of WithShardColumn.
const maxShardTypeBytes = 64

func validateShardType(t string) error {
	if t == "" || len(t) > maxShardTypeBytes {
		return fmt.Errorf("%w: shard column type %q: want 1 to %d bytes", ErrInvalidArgument, t, maxShardTypeBytes)
	}
	for _, r := range t {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case r == ' ', r == '_', r == '(', r == ')', r == ',':
		default:
			return fmt.Errorf("%w: shard column type %q: %q is not a letter, digit, space, underscore, parenthesis or comma", ErrInvalidArgument, t, r)
		}
	}
	if t[0] < 'A' || (t[0] > 'Z' && t[0] < 'a') || t[0] > 'z' {
		return fmt.Errorf("%w: shard column type %q: want a type name first", ErrInvalidArgument, t)
	}
	return nil
}

// shardKey is the context key of WithShard's value.
type shardKey struct{}

// WithShard returns a copy of ctx that carries the shard value of the
// requests made with it: the value of the shard column (WithShardColumn)
// of the records that Do, DoTx, Run and the operators read and write under
// ctx. It is bound as a statement's parameter, as it is: an int64, a string
// an int, or a []byte, which the driver converts to the column's type, such as
// the int64 of a bigint customer id. A middleware that knows the customer,
// in front of idemhttp's or idemgrpc's, sets it in the request's context.
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

// shardOf returns the shard value of a call with ctx: nil for a Store
// without a shard column, and ErrInvalidArgument for a Store with one when
// ctx has none, or one of a type that the Store cannot bind.
func (s *Store) shardOf(ctx context.Context) (any, error) {
	if s.shardType == "" {
		return nil, nil
	}
	v, ok := ShardFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: the Store's table has a shard column and the context has no shard value: set it with idem.WithShard", ErrInvalidArgument)
	}
	switch v := v.(type) {
	case int, int64, string:
	case []byte:
		if v == nil {
			return nil, fmt.Errorf("%w: nil shard value", ErrInvalidArgument)
		}
	default:
		return nil, fmt.Errorf("%w: shard value of type %T, want int, int64, string or []byte", ErrInvalidArgument, v)
	}
	return v, nil
}

// scannedShard is a shard value v as the driver scanned it, to be bound
// again: a []byte of a column that is not binary becomes a string, since a
// driver sends a []byte as binary data, which such a column may refuse
// (lib/pq's, for a uuid).
func (s *Store) scannedShard(v any) any {
	b, ok := v.([]byte)
	if !ok {
		return v
	}
	t := strings.ToLower(s.shardType)
	if strings.Contains(t, "bin") || strings.Contains(t, "blob") || strings.Contains(t, "bytea") {
		return b
	}
	return string(b)
}

// binder is the binder of the Store's statements.
func (s *Store) binder() binder {
	return binder{d: s.d, sharded: s.shardType != ""}
}

// tableStatements returns d's schema and statements of the table that c
// describes: with a shard column when c has one, which needs a dialect
// that can make it.
func tableStatements(d Dialect, c config) ([]string, dialect.Statements, error) {
	if c.shardType == "" {
		return d.Schema(c.table), d.Statements(c.table, c.lockTimeout), nil
	}
	sc, ok := d.(dialect.ShardColumn)
	if !ok {
		return nil, dialect.Statements{}, fmt.Errorf("%w: %s dialect has no table with a shard column (dialect.ShardColumn)", ErrInvalidArgument, d.Name())
	}
	return sc.ShardColumnSchema(c.table, c.shardType), sc.ShardColumnStatements(c.table, c.shardType, c.lockTimeout), nil
}

// checkShardBound makes sure that, in a table with a shard column, every
// statement that names a record by its key names it by its shard value too:
// a statement with the key alone would read or write the records of every
// shard value, and, on a sharded database, every shard.
func (s *Store) checkShardBound(named map[string]*statement) error {
	if s.shardType == "" {
		return nil
	}
	for what, st := range named {
		if st.uses(paramKey) && !st.uses(paramShard) {
			return fmt.Errorf("%w: %s dialect: the %s statement binds {key} and not {shard}", ErrInvalidArgument, s.d.Name(), what)
		}
	}
	return nil
}
