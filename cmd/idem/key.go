package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
)

// keyHelp is the paragraph of the help of every command that takes a key:
// inspect, settle, release and forget take it the same way, and say why.
const keyHelp = `The key is given with -key, as for every command of idem that takes one,
never as an argument: a key is whatever the client sent, and may begin with
a dash, and a command that shows or changes a record names which one in so
many words. A key given as an argument is refused, with exit status 2.`

// keyFlags are the -key, -scope and -shard flags of inspect, settle, release
// and forget.
type keyFlags struct {
	key, scope string
	shard      shardFlag
	// shardType is the shard column's type once withShard has put -shard
	// in the context, and "" for a table without a shard column; bound is
	// the value it put there.
	shardType string
	bound     any
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.key, "key", "", "the idempotency key, as the client sent it (required)")
	fs.StringVar(&k.scope, "scope", "", "the client's scope, for a key stored through idemhttp WithScope")
	fs.Var(&k.shard, "shard", "the record's shard value, as the service gave it to idem.WithShard\n"+
		"(required with -shard-column, refused without it)")
}

// stored returns the key as the table holds it. rest are the command's
// positional arguments, which a command that takes a key refuses: an
// argument there is most likely a key in the form of an older idem inspect,
// and the message says how to give it.
func (k *keyFlags) stored(cmd string, rest []string) (string, error) {
	if len(rest) > 0 {
		if k.key == "" && len(rest) == 1 {
			return "", usageError("%s takes the key with -key, not as an argument: idem %s -key %s ...; run 'idem %s -h' for help", cmd, cmd, strconv.Quote(rest[0]), cmd)
		}
		return "", usageError("%s takes no arguments, got %q: give the key with -key; run 'idem %s -h' for help", cmd, rest, cmd)
	}
	if k.key == "" {
		return "", usageError("%s needs -key: the key the client sent; run 'idem %s -h' for help", cmd, cmd)
	}
	key := k.key
	if k.scope != "" {
		key = idemhttp.StoredKey(k.scope, key)
	}
	if len(key) > idem.MaxStoredKeyBytes {
		return "", usageError("a key is 1 to %d bytes, got %d", idem.MaxStoredKeyBytes, len(key))
	}
	return key, nil
}

// name names the key in a message as the operator gave it: a stored key
// with a scope is 65 bytes of hash longer, and tells them nothing.
func (k *keyFlags) name() string {
	n := strconv.Quote(k.key)
	if k.scope != "" {
		n = fmt.Sprintf("%q in scope %q", k.key, k.scope)
	}
	if k.shardType != "" {
		n += " of shard " + shardText(k.bound, k.shardType)
	}
	return n
}

// writeKey writes the key line of a command's output, and the shard line
// below it on a table with a shard column.
func (k *keyFlags) writeKey(w io.Writer, stored string) {
	line(w, "key", strconv.Quote(stored))
	if k.shardType != "" {
		line(w, "shard", shardText(k.bound, k.shardType))
	}
}
