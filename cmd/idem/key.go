package main

import (
	"flag"
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

// scopeHelp is the paragraph of the help of every command that takes a
// key, on the keys that the adapters store: which flag reaches a key for
// which option of theirs.
const scopeHelp = `A key that came through idemhttp or idemgrpc is stored under
StoredKey(scope, key), the hex SHA-256 of the client's scope, a colon and
the key. Give the key as the client sent it, and with it:

  -scope SCOPE     for a service made with WithScope: the scope that its
                   function gave the client (an account, a tenant)
  -single-client   for a service made with WithSingleClient, whose keys
                   are stored with the empty scope

A key that the service gave the Store itself (Do, DoTx, Run) takes neither.`

// keyFlags are the -key, -scope, -single-client and -shard flags of
// inspect, settle, release and forget.
type keyFlags struct {
	key    string
	scope  givenFlag
	single bool
	shard  givenFlag
	// shardKind is the shard column's kind once withShard has put -shard
	// in the context, and the zero ShardKind for a table without a shard
	// column; bound is the value it put there.
	shardKind idem.ShardKind
	bound     any
}

// givenFlag is a flag that records whether it was given, since an empty
// string is a value of its own: a shard value of a text column like any
// other, and a -scope that no adapter stores a key under.
type givenFlag struct {
	value string
	set   bool
}

func (g *givenFlag) String() string { return g.value }

func (g *givenFlag) Set(v string) error {
	g.value, g.set = v, true
	return nil
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.key, "key", "", "the idempotency key, as the client sent it (required)")
	fs.Var(&k.scope, "scope", "the client's scope, for a key stored through idemhttp or idemgrpc made\n"+
		"with WithScope")
	fs.BoolVar(&k.single, "single-client", false, "for a key stored through idemhttp or idemgrpc made with\n"+
		"WithSingleClient, under StoredKey(\"\", key)")
	fs.Var(&k.shard, "shard", "the record's shard `VALUE`, as the service gave it to idem.WithShard:\n"+
		"for -shard-column int64 decimal digits, text(N) the text, bytes(N) hex\n"+
		"digits, uuid 8-4-4-4-12 (required with -shard-column, refused without it)")
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
	switch {
	case k.single && k.scope.set:
		return "", usageError("give -scope or -single-client, not both: -scope for a service made with WithScope, -single-client for one made with WithSingleClient; run 'idem %s -h' for help", cmd)
	case k.scope.set && k.scope.value == "":
		// The adapters refuse a client whose scope is empty: a key
		// with the empty scope is one of a single-client service.
		return "", usageError("-scope is empty: for a key stored through a service made with WithSingleClient, give -single-client; run 'idem %s -h' for help", cmd)
	case k.single:
		key = idemhttp.StoredKey("", key)
	case k.scope.set:
		key = idemhttp.StoredKey(k.scope.value, key)
	}
	if len(key) > idem.MaxStoredKeyBytes {
		return "", usageError("a key is 1 to %d bytes, got %d", idem.MaxStoredKeyBytes, len(key))
	}
	return key, nil
}

// name names the key in a message as the operator gave it: a stored key
// of an adapter is 65 bytes of hash longer, and tells them nothing.
func (k *keyFlags) name() string {
	n := strconv.Quote(k.key)
	switch {
	case k.single:
		n += " of the single client"
	case k.scope.set:
		n += " in scope " + strconv.Quote(k.scope.value)
	}
	if k.shardKind.Valid() {
		n += " of shard " + shardText(k.bound, k.shardKind)
	}
	return n
}

// writeKey writes the key line of a command's output, and the shard line
// below it on a table with a shard column.
func (k *keyFlags) writeKey(w io.Writer, stored string) {
	line(w, "key", strconv.Quote(stored))
	if k.shardKind.Valid() {
		line(w, "shard", shardText(k.bound, k.shardKind))
	}
}
