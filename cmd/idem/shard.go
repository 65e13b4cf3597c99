package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
)

// shardHelp is the paragraph of the help of every command that takes a key,
// on a table with a shard column.
const shardHelp = `On a table with a shard column (idem.WithShardColumn), a record is named
by its shard value and its key, as the service's requests name it with
idem.WithShard: give the column's kind with -shard-column, as the service
gives it (int64, text(N), bytes(N) or uuid), and the value with -shard,
read as the kind says:

  int64     a decimal 64-bit integer: -shard 42, -shard -7
  text(N)   the text as given, of at most N bytes of UTF-8, compared byte
            for byte: -shard 'acme corp'
  bytes(N)  hex digits, two for each of at most N bytes, in either case,
            since a byte string may hold bytes that no one can type: as
            the command shows the value, -shard 00ff10
  uuid      the 8-4-4-4-12 form, in either case:
            -shard 5f0c3c1e-8f0b-4a43-9a57-1a3c1d6c2b11

A value that the kind cannot hold is refused, with exit status 2. -shard
without -shard-column is refused, as is -shard-column without -shard: the
same key may be stored for many shard values, and the command changes or
shows one record.`

// shardValue returns the value of -shard as the Store binds it for a table
// whose shard column holds values of the kind that column, -shard-column,
// names: nil when the table has no shard column. A bad -shard-column, a
// missing -shard, or one given without -shard-column, or one that the kind
// cannot hold, is a usage error, found before the command connects.
func (k *keyFlags) shardValue(cmd, column string) (any, error) {
	kind, err := shardColumnKind(column)
	switch {
	case err != nil:
		return nil, err
	case !kind.Valid() && k.shard.set:
		return nil, usageError("-shard needs -shard-column: a shard value names a record only in a table with a shard column; run 'idem %s -h' for help", cmd)
	case !kind.Valid():
		return nil, nil
	case !k.shard.set:
		return nil, usageError("%s needs -shard with -shard-column: the shard value of the record, as the service gave it to idem.WithShard; run 'idem %s -h' for help", cmd, cmd)
	}
	s := k.shard.value
	refuse := func(why string, args ...any) error {
		return usageError("-shard %s: the shard column is %v, and %s", strconv.Quote(s), kind, fmt.Sprintf(why, args...))
	}
	var v any
	switch kind.Type {
	case dialect.ShardInt64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, refuse("the value is not a decimal 64-bit integer")
		}
		v = n
	case dialect.ShardText:
		switch {
		case len(s) > kind.MaxBytes:
			return nil, refuse("the value is %d bytes long, longer than %d", len(s), kind.MaxBytes)
		case !utf8.ValidString(s):
			return nil, refuse("the value is not valid UTF-8")
		}
		v = s
	case dialect.ShardBytes:
		b, err := hex.DecodeString(s)
		switch {
		case err != nil:
			return nil, refuse("the value is not hex digits, two for each byte")
		case len(b) > kind.MaxBytes:
			return nil, refuse("the value is %d bytes long, longer than %d", len(b), kind.MaxBytes)
		}
		v = b
	case dialect.ShardUUID:
		v = s
	}
	bound, err := kind.Value(v)
	if err != nil {
		// What the checks above leave to the kind: a NUL byte in a
		// text, a UUID not in the 8-4-4-4-12 form.
		return nil, refuse("the column cannot hold it: %v", err)
	}
	return bound, nil
}

// withShard returns ctx with the shard value of -shard, for the Store's
// calls on the key's record, and remembers the value for the command's
// messages. ctx is returned as it is for a table without a shard column.
func (k *keyFlags) withShard(ctx context.Context, cmd, column string) (context.Context, error) {
	v, err := k.shardValue(cmd, column)
	if err != nil || v == nil {
		return ctx, err
	}
	// shardValue has read column.
	k.shardKind, _ = shardColumnKind(column)
	k.bound = v
	return idem.WithShard(ctx, v), nil
}

// shardText writes a shard value, as the Store binds it and Unfinished
// gives it (ShardKind.Value), the way an operator gives it back to -shard:
// an int64's digits; a text quoted, as keys are, since it may hold spaces
// or be empty; a byte string's hex digits (quoted only when it is empty,
// so that the column shows something); a UUID as it is.
func shardText(v any, kind idem.ShardKind) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case []byte:
		if len(v) == 0 {
			return `""`
		}
		return hex.EncodeToString(v)
	case string:
		if kind.Type == dialect.ShardUUID {
			return v
		}
		return strconv.Quote(v)
	}
	return fmt.Sprint(v)
}

// checkShardKind makes sure that the table's shard_key holds the values of
// -shard-column's kind, by the dialect's own check (the one that the
// Store's Migrate runs): a command whose -shard-column names another kind
// than the service's would bind values the column converts, or refuses,
// and name other records than the service's. It is a usage error, since
// -shard-column is then not the table's; a dialect without the check is
// trusted.
func (d *database) checkShardKind(ctx context.Context, db *sql.DB) error {
	sc, ok := d.dialect.(dialect.ShardColumn)
	if !d.sharded() || !ok {
		return nil
	}
	q, typ := sc.ShardColumnCheck(d.table, d.shardKind)
	var columns, fitting int
	if err := db.QueryRowContext(ctx, q).Scan(&columns, &fitting); err != nil {
		return fmt.Errorf("check the shard column of table %s: %w", d.table, err)
	}
	switch {
	case columns == 0:
		return usageError("table %s has no shard column, shard_key, and -shard-column %v says it has: check -table, or leave out -shard-column; docs/operations.md, \"Moving a table to a shard column\", says how to give a table one", d.table, d.shardKind)
	case fitting == 0:
		return usageError("the shard column of table %s is not of type %s, which holds the values of -shard-column %v: give the kind that the service gives idem.WithShardColumn; docs/operations.md, \"Moving a table to a shard column\", says how to move a table to another kind", d.table, typ, d.shardKind)
	}
	return nil
}
