package idem

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
	"github.com/idemgo/idem/internal/testhook"
)

// Dialect is what a Store needs to know about one database family: the SQL
// of its statements and the meaning of its errors. Its contract is in
// package dialect, with the built-in dialects, which Postgres, MySQL,
// MariaDB, TiDB, Vitess and SQLite return; a dialect for another database
// implements it in a package of its own (docs/dialects.md).
type Dialect = dialect.Dialect

// Store claims idempotency keys in the caller's transactions. Make one with
// New; it is safe for concurrent use.
type Store struct {
	d                Dialect
	table            string
	shardKind        ShardKind // WithShardColumn's, zero for a table without the column
	retention        int64     // microseconds
	lockTimeout      time.Duration
	clock            func() time.Time
	maxResponseBytes int
	observers        []func(context.Context, Event)
	lookupFirst      LookupPolicy
	retries          retryShare // the estimate of LookupAdaptive
	schema           []string
	claim, takeover  statement
	lookup, complete statement
	abandon, purge   statement
	// claimWrite is empty where the dialect claims in one statement.
	claimWrite statement
	// claimedWithoutRow is the dialect's Statements.ClaimedWithoutRow.
	claimedWithoutRow bool
	// incarnations says that the dialect's claims write an incarnation
	// into the records they create, and that its statements return it
	// (see dialect.Statements); without, every record reads 0.
	incarnations bool
	// claimLost is empty where the claim returns the record it lost to;
	// claimHeld is empty where claimLost tells a held key itself.
	claimLost, claimHeld statement
	// purgeSelect is empty where the dialect purges in one statement,
	// purge; purgeDelete is its PurgeDelete, bound per batch (bindList).
	purgeSelect statement
	purgeDelete string
	// stats and countExpired count the table's records; empty where the
	// dialect has no such statement.
	stats, countExpired statement
	// purgeSelectSQL is the dialect's PurgeSelect, as it gave it, for a
	// purge shard by shard, which writes {limit} into it (purgeShards).
	purgeSelectSQL string
	tokens         atomic.Uint64
	// steps holds the statements of multi-step requests, nil where the
	// dialect has none; lease is WithLease's, and leaseClock, nil but in
	// tests (internal/testhook), moves the database's clock that leases
	// run on.
	steps      *stepStatements
	lease      time.Duration
	leaseClock func() time.Duration
	// purgeHeld, nil but in tests, is called with the keys of each purge
	// batch between its PurgeSelect and its PurgeDelete.
	purgeHeld func(keys [][]byte)
}

// unwrapHooks takes the test hooks of internal/testhook off d, which only
// this repository's tests can wrap a dialect in, into c.
func unwrapHooks(d Dialect, c *config) Dialect {
	for {
		switch h := d.(type) {
		case testhook.LeaseClock:
			d, c.leaseClock = h.Dialect, h.Offset
		case testhook.PurgeHeld:
			d, c.purgeHeld = h.Dialect, h.Held
		default:
			return d
		}
	}
}

// New returns a Store that keeps records with dialect d. It validates the
// options and the dialect's statements; it does not touch the database (see
// Migrate).
func New(d Dialect, opts ...Option) (*Store, error) {
	c := defaultConfig()
	d = unwrapHooks(d, &c)
	if d == nil {
		return nil, fmt.Errorf("%w: nil dialect", ErrInvalidArgument)
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			return nil, err
		}
	}
	schema, st, err := tableStatements(d, c)
	if err != nil {
		return nil, err
	}
	s := &Store{
		d:                d,
		table:            c.table,
		shardKind:        c.shardKind,
		retention:        c.retention.Microseconds(),
		lockTimeout:      c.lockTimeout,
		clock:            c.clock,
		maxResponseBytes: c.maxResponseBytes,
		observers:        c.observers,
		lookupFirst:      c.lookupFirst,
		schema:           schema,
		lease:            c.lease,
		leaseClock:       c.leaseClock,
		purgeHeld:        c.purgeHeld,
	}
	bd := s.binder()
	record := []param{paramKey, paramRequestHash, paramCreatedAt, paramExpiresAt}
	for _, b := range []struct {
		dst      *statement
		what     string
		sql      string
		optional bool
		params   []param
	}{
		{&s.claim, "claim", st.Claim, false, append(record, paramToken, paramIncarnation, paramLockID)},
		{&s.claimWrite, "claim write", st.ClaimWrite, true, append(record, paramToken, paramIncarnation, paramLockID)},
		{&s.claimLost, "claim lost", st.ClaimLost, true, []param{paramKey, paramLockID}},
		{&s.claimHeld, "claim held", st.ClaimHeld, true, []param{paramKey, paramLockID}},
		{&s.takeover, "takeover", st.Takeover, true, append(record, paramToken, paramIncarnation)},
		{&s.lookup, "lookup", st.Lookup, false, []param{paramKey}},
		{&s.complete, "complete", st.Complete, false, []param{paramKey, paramToken, paramStatus, paramHeader, paramBody, paramChecksum}},
		{&s.abandon, "abandon", st.Abandon, false, []param{paramKey, paramToken}},
		{&s.purge, "purge", st.Purge, st.PurgeSelect != "" || st.PurgeDelete != "", []param{paramNow, paramLimit}},
		{&s.purgeSelect, "purge select", st.PurgeSelect, true, []param{paramNow, paramLimit}},
		{&s.stats, "stats", st.Stats, true, []param{paramNow}},
		{&s.countExpired, "count expired", st.CountExpired, true, []param{paramNow}},
	} {
		if b.sql == "" {
			if b.optional {
				continue
			}
			return nil, fmt.Errorf("%w: %s dialect has no %s statement", ErrInvalidArgument, d.Name(), b.what)
		}
		stmt, err := bd.bind(b.what, b.sql, b.params...)
		if err != nil {
			return nil, err
		}
		*b.dst = stmt
	}
	if !s.claim.uses(paramKey) || (s.claimWrite.query != "" && !s.claimWrite.uses(paramKey)) {
		return nil, fmt.Errorf("%w: %s dialect: the claim statement does not bind {key}", ErrInvalidArgument, d.Name())
	}
	if s.claimLost.query != "" && !s.claimLost.uses(paramKey) {
		return nil, fmt.Errorf("%w: %s dialect: the claim lost statement does not bind {key}", ErrInvalidArgument, d.Name())
	}
	if s.claimWrite.query != "" && !s.claim.uses(paramToken) {
		return nil, fmt.Errorf("%w: %s dialect: the claim statement that reads what the claim wrote does not bind {token}", ErrInvalidArgument, d.Name())
	}
	if (st.PurgeSelect == "") != (st.PurgeDelete == "") {
		return nil, fmt.Errorf("%w: %s dialect sets one of PurgeSelect and PurgeDelete: set both or neither", ErrInvalidArgument, d.Name())
	}
	if st.PurgeDelete != "" {
		del, err := bd.bind("purge delete", st.PurgeDelete, paramKeys, paramNow)
		if err != nil {
			return nil, err
		}
		if !del.uses(paramKeys) {
			return nil, fmt.Errorf("%w: %s dialect: the purge delete statement does not bind {keys}", ErrInvalidArgument, d.Name())
		}
		s.purgeDelete = st.PurgeDelete
		s.purgeSelectSQL = st.PurgeSelect
	}
	s.claimedWithoutRow = st.ClaimedWithoutRow
	if err := s.checkIncarnations(); err != nil {
		return nil, err
	}
	steps, err := bindSteps(bd, st.Run)
	if err != nil {
		return nil, err
	}
	s.steps = steps
	if err := s.checkShardBound(s.named()); err != nil {
		return nil, err
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("idem: seeding claim tokens: %w", err)
	}
	s.tokens.Store(binary.BigEndian.Uint64(seed[:]))
	return s, nil
}

// Limits on the inputs of Do.
const (
	// MaxStoredKeyBytes is the longest idempotency key that Do and the
	// Store's other methods take, in bytes: the key as it is stored. It is
	// not what a client may send through idemhttp or idemgrpc, whose
	// MaxClientKeyLength is shorter, so that the client's key and a hash
	// of its scope fit together within this limit.
	MaxStoredKeyBytes = 512
	// MaxHashBytes is the longest request hash, in bytes: room for SHA-512.
	MaxHashBytes = 64
)

// Outcome is what Do found for a key.
type Outcome int

const (
	// Claimed means this call owns the key: fn ran, and its response is
	// stored in the caller's transaction. Commit it.
	Claimed Outcome = iota + 1
	// Replay means a request with this key and the same hash finished
	// earlier; Result.Response is its stored response, byte for byte.
	// fn did not run and Do wrote nothing.
	Replay
	// Mismatch means the key was used before with a different request
	// hash: a client bug or an attack, never a retry (HTTP 422). fn did
	// not run and Do wrote nothing.
	Mismatch
	// InFlight means another transaction holds the key and did not finish
	// within the lock timeout (HTTP 409). fn did not run and Do wrote
	// nothing; the caller's transaction is still usable.
	InFlight
)

// String returns "claimed", "replay", "mismatch" or "in flight".
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case Replay:
		return "replay"
	case Mismatch:
		return "mismatch"
	case InFlight:
		return "in flight"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Response is what a Store keeps for a key, and replays.
type Response struct {
	// Status is the response's status, an HTTP status code or any other
	// number that fits in 32 bits.
	Status int
	// Header is replayed as stored; an empty header replays as nil.
	Header http.Header
	// Body is replayed byte for byte; an empty body replays as empty, not nil.
	Body []byte
}

// Result is the answer of Do.
type Result struct {
	Outcome Outcome
	// Response is what fn returned (and what was stored) for Claimed, and
	// the stored response for Replay. It is empty for Mismatch and
	// InFlight: a stored response is never shown to a different request.
	Response Response
	// CreatedAt is when the key was first claimed, and ExpiresAt when its
	// record stops counting, by the Store's clock. They are zero for an
	// InFlight key whose record is not visible; ExpiresAt is zero for an
	// unfinished multi-step request (Store.Run), which does not expire.
	CreatedAt, ExpiresAt time.Time
	// LeaseLeft is, for Run's InFlight answer about a multi-step request
	// that a live runner holds, how long the runner's lease still runs
	// by the database's clock: a retry after it finds the request
	// finished, or takes it over from a runner that died. It is zero for
	// the other answers. An HTTP service can send it as Retry-After.
	LeaseLeft time.Duration
	// Incarnation tells the record answered from apart from every other
	// record that its key has had or will have (see Identity): for
	// Claimed, the record that this call created, or, for Run, the
	// request that it resumed; for Replay, Mismatch and InFlight, the
	// record found. A random nonzero number that the claim which created
	// the record wrote, and that no later phase, resume or takeover of a
	// live request changes; the request that follows a Forget, a release
	// or the expiry of the record gets another. It is zero for a record
	// created before its table had the column (docs/operations.md,
	// "Upgrading the table"), for a dialect whose statements write none,
	// and for an InFlight key whose record is not visible.
	Incarnation int64

	token int64 // the claim that wrote the record answered from
}

// Func is the work that a key protects. It runs in the caller's transaction
// tx, and writes its effect there, so that the effect and the record of the
// key commit together or not at all. Its Response is stored and replayed to
// later requests with the same key. An error stores nothing: Do returns it,
// and the caller rolls back. An error that wraps ErrRetry, or that the
// dialect reports as a conflict, makes DoTx run the transaction again. To
// store a refusal while undoing the writes that led to it, see Refusable.
// Its context carries the request's Identity (IdentityFrom), by which it
// keys the rows it writes.
//
// fn must return the error of a statement that failed, not carry on: on
// MySQL and SQLite a deadlock, a snapshot conflict or an interrupted
// statement has already rolled the whole transaction back, and tx runs
// whatever comes next in autocommit, outside the protection of the key.
// fn must never commit or roll back tx: the caller (or DoTx) does, after Do
// has stored the response. If fn commits, its effect and an unfinished
// record are committed and the key answers InFlight until an operator
// settles it; Do and DoTx detect it and return ErrTxEnded, also when fn
// returns an error after.
type Func func(ctx context.Context, tx *sql.Tx) (Response, error)

// Do runs fn at most once for key, in the caller's transaction tx, and
// answers what happened (see Outcome). reqHash identifies the request, so
// that a different request under the same key is a Mismatch; Fingerprint
// makes one.
//
// On Claimed, the record of the key is written in tx together with fn's
// effect: commit tx to keep both, roll it back to keep neither. On the other
// outcomes Do writes nothing, and tx is as it was (roll it back or carry on).
//
// An error means nothing was stored; roll tx back. Errors that match
// ErrRetry mean tx is lost to a conflict: run the whole transaction again
// (DoTx does). fn's own error is returned as it is, wrapped in ErrRetry when
// the dialect reports it as a conflict.
//
// While tx is open, a concurrent Do with the same key waits up to the lock
// timeout for it and then answers InFlight; keep transactions that claim
// keys short.
func (s *Store) Do(ctx context.Context, tx *sql.Tx, key string, reqHash []byte, fn Func) (Result, error) {
	return do(ctx, s, sqlIn(tx), key, reqHash, fn.in(tx))
}

// do is Do on any driver's transaction tx: run is the Func with the
// driver's own transaction, nil for a nil Func. It checks the Store and its
// arguments, and reports the call to the observers.
func do(ctx context.Context, s *Store, tx driver.Tx, key string, reqHash []byte, run func(context.Context) (Response, error)) (Result, error) {
	if err := s.on(tx, "transaction"); err != nil {
		return Result{}, err
	}
	if err := validateCall(key, reqHash, run == nil); err != nil {
		return Result{}, err
	}
	shard, err := s.shardOf(ctx)
	if err != nil {
		return Result{}, err
	}
	start := s.startEvent()
	res, wait, err := s.doOnce(ctx, tx, key, s.newValues(key, shard, reqHash), run)
	s.endEvent(ctx, start, key, res, err, wait, 1)
	return res, err
}

// in returns fn bound to tx, the transaction it runs in, as do takes it:
// nil for a nil fn, which do refuses.
func (fn Func) in(tx *sql.Tx) func(context.Context) (Response, error) {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context) (Response, error) { return fn(ctx, tx) }
}

// checkIncarnations decides whether the dialect's records have an
// incarnation: they do when its claim writes {incarnation}. A takeover of an
// expired record must then write one too, or the new request on the key
// would carry the old one's; and a takeover must not write one where the
// claim does not.
func (s *Store) checkIncarnations() error {
	s.incarnations = s.claim.uses(paramIncarnation) || s.claimWrite.uses(paramIncarnation)
	if s.takeover.query != "" && s.takeover.uses(paramIncarnation) != s.incarnations {
		if s.incarnations {
			return fmt.Errorf("%w: %s dialect: the claim writes {incarnation} and the takeover statement does not: a record taken over would keep the incarnation of the request before", ErrInvalidArgument, s.d.Name())
		}
		return fmt.Errorf("%w: %s dialect: the takeover statement writes {incarnation} and the claim does not", ErrInvalidArgument, s.d.Name())
	}
	return nil
}

// MaxResponseBytes returns the largest response the Store stores, as set by
// WithMaxResponseBytes: the body and the encoded header together. It is 0 for
// a Store not made by New. Middleware that holds a response in memory before
// Do stores it can stop the response at this size.
func (s *Store) MaxResponseBytes() int {
	if s.check() != nil {
		return 0
	}
	return s.maxResponseBytes
}

// Dialect returns the dialect the Store was made with.
func (s *Store) Dialect() Dialect {
	if s == nil {
		return nil
	}
	return s.d
}

// StatementText is one statement as a Store sends it, without its values:
// the text with the dialect's placeholders, and the names of the values
// that the Store binds to them.
type StatementText struct {
	// SQL is the text of the statement, with the dialect's placeholders.
	SQL string
	// Params names the values bound to the placeholders, in order, by the
	// parameter names of Statements: "key", "request_hash", and so on.
	Params []string
}

// Queries returns the statements the Store sends, keyed by the names of the
// fields of dialect.Statements that hold them: "Claim", "Lookup",
// "Complete", "Abandon", and, where the dialect has them, "ClaimWrite",
// "ClaimLost", "ClaimHeld", "Takeover", "Purge", or "PurgeSelect" and
// "PurgeDelete", "Stats" and "CountExpired" (see those fields for what each
// does and when it runs). The keys are the
// field names exactly, so that a tool can go from one to the other without
// a table of its own. "PurgeDelete" is shown for a batch of one key; a
// batch of n keys has n placeholders in its list. They are for tools and
// tests that must match the Store's SQL exactly, such as the sqlmock
// expectations of package idemtest.
func (s *Store) Queries() map[string]StatementText {
	if s.check() != nil {
		return nil
	}
	qs := make(map[string]StatementText, 12)
	for name, st := range s.statements() {
		if st.query == "" {
			continue
		}
		q := StatementText{SQL: st.query}
		for _, p := range st.params {
			q.Params = append(q.Params, paramNames[p])
		}
		qs[name] = q
	}
	if s.purgeDelete != "" {
		del, _ := s.purgeDeleteFor(1) // New bound it once already
		q := StatementText{SQL: del.query}
		for _, p := range del.params {
			q.Params = append(q.Params, paramNames[p])
		}
		qs["PurgeDelete"] = q
	}
	return qs
}

// statements returns the Store's statements but PurgeDelete, keyed by the
// names of the fields of dialect.Statements that hold them.
func (s *Store) statements() map[string]*statement {
	return map[string]*statement{
		"Claim": &s.claim, "Takeover": &s.takeover, "Lookup": &s.lookup,
		"Complete": &s.complete, "Abandon": &s.abandon, "Purge": &s.purge,
		"ClaimWrite": &s.claimWrite, "ClaimLost": &s.claimLost, "ClaimHeld": &s.claimHeld,
		"PurgeSelect": &s.purgeSelect, "Stats": &s.stats, "CountExpired": &s.countExpired,
	}
}

// named returns statements and, where the dialect has them, the
// statements of multi-step requests, as "Run.Start" and so on.
func (s *Store) named() map[string]*statement {
	m := s.statements()
	if st := s.steps; st != nil {
		for name, q := range map[string]*statement{
			"Run.Start": &st.start, "Run.Progress": &st.progress, "Run.Takeover": &st.takeover,
			"Run.Advance": &st.advance, "Run.Mark": &st.mark, "Run.Renew": &st.renew,
			"Run.Finish": &st.finish, "Run.Release": &st.release, "Run.Backoff": &st.backoff,
		} {
			m[name] = q
		}
	}
	return m
}

// on checks what every operation checks first: that the Store was made by
// New, and that db, the database or transaction that the operation runs on
// (what names it), is there. A database/sql pool whose transactions begin at
// READ UNCOMMITTED is refused on a database whose sessions keep a
// transaction's isolation level: the Store's reads outside its transactions
// would then see records that other transactions have not committed.
func (s *Store) on(db driver.Tx, what string) error {
	if err := s.check(); err != nil {
		return err
	}
	if db == nil {
		return fmt.Errorf("%w: nil %s", ErrInvalidArgument, what)
	}
	if l, ok := db.(interface{ readsUncommitted() bool }); ok && l.readsUncommitted() && dialect.CapabilitiesOf(s.d).KeepsIsolation {
		return fmt.Errorf("%w: READ UNCOMMITTED on %s, whose sessions keep a transaction's isolation level, and would then read records that other transactions have not committed", ErrInvalidArgument, s.d.Name())
	}
	return nil
}

func (s *Store) check() error {
	if s == nil || s.d == nil {
		return fmt.Errorf("%w: Store not made by New", ErrInvalidArgument)
	}
	return nil
}
