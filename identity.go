package idem

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Identity names the record of one request: which key, for which client
// and customer, and which of the records that the key has had over time.
// Do, DoTx and Run put it in the context of the work they run (a Func, a
// Phase, a Call, a Final), where IdentityFrom reads it, so that the work
// can key its own rows by the request it serves rather than by a client's
// raw key, which two clients may share.
type Identity struct {
	// Key is the key as the Store keeps it: the key that Do, DoTx or Run
	// was called with, which idemhttp and idemgrpc make from the client's
	// scope and key with their StoredKey. Like the client's key, it may
	// carry what the client considers private: key a table by it, but do
	// not log it.
	Key string
	// Scope is the scope that an adapter put in the context with
	// WithScope (idemhttp's and idemgrpc's, for the client that sent the
	// request), empty where none did.
	Scope string
	// Shard is the record's shard value (WithShardColumn, WithShard), as
	// the Store binds it, the kind's one Go value (see ShardKind), such as
	// the lower-case form of a UUID given in upper case; nil for a Store
	// without a shard column.
	Shard any
	// Incarnation tells this record from every other record that the same
	// key has had or will have: after Forget, ReleaseUndone or the
	// takeover of an expired record, the next request on the key gets a
	// record of its own, with another Incarnation. The claim that creates
	// a record writes it, a random nonzero number, and no later phase,
	// resume or takeover changes it. It is zero for a record that was
	// created before its table had the column (docs/operations.md,
	// "Upgrading the table").
	Incarnation int64
}

// identityKey is the context key of a request's Identity.
type identityKey struct{}

// workContext is the context of a request's work: the caller's context,
// and the request's Identity. It holds the Identity itself, where
// context.WithValue would hold a copy boxed on its own, so that Do, which
// keeps it in the values of its claim (Store.work), hands a Func its
// Identity without an allocation of its own.
type workContext struct {
	context.Context
	id Identity
}

// Value returns the Identity, as a pointer that IdentityFrom copies, for
// identityKey, and asks the caller's context for any other key.
func (c *workContext) Value(key any) any {
	if _, ok := key.(identityKey); ok {
		return &c.id
	}
	return c.Context.Value(key)
}

// String names c as the contexts of package context name themselves,
// without the Identity's fields: a stored key is not to be logged.
func (c *workContext) String() string {
	return fmt.Sprint(c.Context) + ".WithIdentity"
}

// work returns the context of the work of the request whose claim is v,
// key being its stored key: ctx, the caller's, with the request's Identity.
// Do, DoTx and Run make every request's Identity here, once the claim has
// taken the record, and keep it in v.
func (s *Store) work(ctx context.Context, key string, v *values) context.Context {
	v.work = workContext{Context: ctx, id: Identity{
		Key:         key,
		Scope:       scopeFrom(ctx),
		Shard:       v.shard,
		Incarnation: v.incarnation,
	}}
	return &v.work
}

// IdentityFrom returns the Identity of the request whose work runs with
// ctx, and whether there is one: there is in the context that Do, DoTx and
// Run hand a Func, Phase, Call or Final, and in any context made from it,
// and none elsewhere.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*Identity)
	if !ok {
		return Identity{}, false
	}
	return *id, true
}

// scopeKey is the context key of WithScope's value.
type scopeKey struct{}

// WithScope returns a copy of ctx that names scope as the client whose
// request the calls made with ctx serve. The Store keeps no scope of its
// own (an adapter folds it into the stored key); it hands scope on, in the
// Identity of the request's work and in every Event about the request, so
// that an operator can tell two clients' requests apart. idemhttp and
// idemgrpc set it; a caller that scopes its keys itself may too.
func WithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// scopeFrom returns the scope that WithScope put in ctx, or "".
func scopeFrom(ctx context.Context) string {
	s, _ := ctx.Value(scopeKey{}).(string)
	return s
}

// CallKey returns the call key that Run hands the Call step named step of
// the request id, for the provider to deduplicate by. It changes with the
// record's Incarnation, so that a new request on a key that was forgotten,
// released or taken over after it expired is never answered with the old
// request's call; two customers' records under one key (WithShardColumn)
// differ in it too. It stays the same for every retry, resume and takeover
// of one record. For a record without an Incarnation (created before its
// table had the column) it is the package function CallKey(id.Key, step),
// the call key such a request sent before the upgrade.
//
// The shard value is not part of it: the Incarnation already tells two
// records of one key apart, and a shard value may read back from the
// database in another form than the caller bound it (a uuid's case, an
// integer's type), which would change the call key of a resumed request.
func (id Identity) CallKey(step string) string {
	if id.Incarnation == 0 {
		return CallKey(id.Key, step)
	}
	h := sha256.New()
	h.Write([]byte(id.Key))
	h.Write([]byte{0})
	h.Write([]byte(step))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(id.Incarnation)))
	return "idem-" + hex.EncodeToString(h.Sum(nil)[:16])
}
