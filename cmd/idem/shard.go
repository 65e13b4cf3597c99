package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemgo/idem"
)

// shardHelp is the paragraph of the help of every command that takes a key,
// on a table with a shard column.
const shardHelp = `On a table with a shard column (idem.WithShardColumn), a record is named
by its shard value and its key, as the service's requests name it with
idem.WithShard: give the column's type with -shard-column and the value with
-shard. For an integer column (BIGINT, INT, INTEGER, SMALLINT and the like)
the value is bound as a 64-bit integer, and must be one; for any other type
it is bound as the text given. -shard without -shard-column is refused, as
is -shard-column without -shard: the same key may be stored for many shard
values, and the command changes or shows one record.`

// integerTypes are the first words of the SQL types whose shard values the
// command binds as an int64: the integer types of the built-in dialects'
// databases, which a driver may refuse, or the database compare as text,
// when given a string.
var integerTypes = map[string]bool{
	"bigint": true, "int": true, "integer": true, "smallint": true,
	"tinyint": true, "mediumint": true, "int2": true, "int4": true, "int8": true,
}

// integerType reports whether sqlType, as -shard-column gives it, is an
// integer type: its first word, without a width such as INT(11), in any
// case.
func integerType(sqlType string) bool {
	word, _, _ := strings.Cut(strings.TrimSpace(sqlType), " ")
	word, _, _ = strings.Cut(word, "(")
	return integerTypes[strings.ToLower(word)]
}

// shardValue returns the value of -shard as the Store binds it for a
// table whose shard column has type shardType (-shard-column): nil when
// the table has no shard column. A missing -shard, or one given without
// -shard-column, or one that is not an integer for an integer column, is
// a usage error, found before the command connects.
func (k *keyFlags) shardValue(cmd, shardType string) (any, error) {
	switch {
	case shardType == "" && k.shard.set:
		return nil, usageError("-shard needs -shard-column: a shard value names a record only in a table with a shard column; run 'idem %s -h' for help", cmd)
	case shardType == "":
		return nil, nil
	case !k.shard.set:
		return nil, usageError("%s needs -shard with -shard-column: the shard value of the record, as the service gave it to idem.WithShard; run 'idem %s -h' for help", cmd, cmd)
	case !integerType(shardType):
		return k.shard.value, nil
	}
	n, err := strconv.ParseInt(k.shard.value, 10, 64)
	if err != nil {
		return nil, usageError("-shard %s: the shard column is %s, and the value is not a 64-bit integer", strconv.Quote(k.shard.value), shardType)
	}
	return n, nil
}

// withShard returns ctx with the shard value of -shard, for the Store's
// calls on the key's record, and remembers the value for the command's
// messages. ctx is returned as it is for a table without a shard column.
func (k *keyFlags) withShard(ctx context.Context, cmd, shardType string) (context.Context, error) {
	v, err := k.shardValue(cmd, shardType)
	if err != nil || v == nil {
		return ctx, err
	}
	k.shardType, k.bound = shardType, v
	return idem.WithShard(ctx, v), nil
}

// shardText writes a shard value as an operator gives it back to -shard:
// the digits of an integer column's value, whichever type the driver read
// it as; any other value quoted, as keys are, since it may hold spaces or
// be empty.
func shardText(v any, shardType string) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case []byte:
		return shardText(string(v), shardType)
	case string:
		if integerType(shardType) {
			if _, err := strconv.ParseInt(v, 10, 64); err == nil {
				return v
			}
		}
		return strconv.Quote(v)
	}
	// Another number a driver may read, such as the uint64 of an
	// unsigned column.
	return fmt.Sprint(v)
}
