package idem

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem/internal/testhook"
)

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

// New returns a Store that keeps records with dialect d. It validates the
// options and the dialect's statements; it does not touch the database (see
// Migrate).
func New(d Dialect, opts ...Option) (*Store, error) {
	c := defaultConfig()
	if moved, ok := d.(testhook.LeaseClock); ok { // only this module's tests can make one
		d, c.leaseClock = moved.Dialect, moved.Offset
	}
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

// Query is one statement as a Store sends it.
type Query struct {
	// SQL is the text of the statement, with the dialect's placeholders.
	SQL string
	// Params names the values bound to the placeholders, in order, by the
	// parameter names of Statements: "key", "request_hash", and so on.
	Params []string
}

// Queries returns the statements the Store sends, keyed by the names of the
// fields of dialect.Statements that hold them: "Claim", "Lookup",
// "Complete", "Abandon", and, where the dialect has them, "ClaimWrite",
// "ClaimLost", "ClaimHeld", "Takeover", "Purge", or "PurgeSelect" and "PurgeDelete" (see
// those fields for what each does and when it runs). The keys are the
// field names exactly, so that a tool can go from one to the other without
// a table of its own. "PurgeDelete" is shown for a batch of one key; a
// batch of n keys has n placeholders in its list. They are for tools and
// tests that must match the Store's SQL exactly, such as the sqlmock
// expectations of package idemtest.
func (s *Store) Queries() map[string]Query {
	if s.check() != nil {
		return nil
	}
	qs := make(map[string]Query, 10)
	for name, st := range s.statements() {
		if st.query == "" {
			continue
		}
		q := Query{SQL: st.query}
		for _, p := range st.params {
			q.Params = append(q.Params, paramNames[p])
		}
		qs[name] = q
	}
	if s.purgeDelete != "" {
		del, _ := s.purgeDeleteFor(1) // New bound it once already
		q := Query{SQL: del.query}
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
		"PurgeSelect": &s.purgeSelect,
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

func (s *Store) check() error {
	if s == nil || s.d == nil {
		return fmt.Errorf("%w: Store not made by New", ErrInvalidArgument)
	}
	return nil
}
