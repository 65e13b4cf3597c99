package idem

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Defaults of a Store's options.
const (
	// DefaultTable is the table a Store uses unless WithTable says otherwise.
	DefaultTable = "idempotency_keys"

	// DefaultRetention is how long a record counts unless WithRetention
	// says otherwise: a retry within 24 hours of the first request replays,
	// a later one runs as a new request.
	DefaultRetention = 24 * time.Hour

	// DefaultLockTimeout is how long a claim waits for another transaction
	// holding the same key unless WithLockTimeout says otherwise. See
	// WithLockTimeout for why it is one second.
	DefaultLockTimeout = time.Second

	// DefaultMaxResponseBytes is the largest response a Store keeps unless
	// WithMaxResponseBytes says otherwise: 1 MiB of body and header.
	DefaultMaxResponseBytes = 1 << 20

	// DefaultLease is how long a runner of a multi-step request owns it
	// without a sign of life, unless WithLease says otherwise: after a
	// runner dies, a retry takes its request over within it.
	DefaultLease = 10 * time.Second
)

// An Option configures a Store in New.
type Option func(*config) error

type config struct {
	table            string
	retention        time.Duration
	lockTimeout      time.Duration
	clock            func() time.Time
	maxResponseBytes int
	observers        []func(context.Context, Event)
	lookupFirst      LookupPolicy
	lease            time.Duration
	leaseClock       func() time.Duration // internal/testhook.LeaseClock
	purgeHeld        func(keys [][]byte)  // internal/testhook.PurgeHeld
	shardKind        ShardKind            // WithShardColumn's; zero without one
}

func defaultConfig() config {
	return config{
		table:            DefaultTable,
		retention:        DefaultRetention,
		lockTimeout:      DefaultLockTimeout,
		clock:            time.Now,
		maxResponseBytes: DefaultMaxResponseBytes,
		lease:            DefaultLease,
	}
}

// WithLease sets how long the runner of a multi-step request (see Store.Run)
// owns it without showing signs of life. The lease is set for d when the
// request begins and when each phase commits, and renewed every d/3 while
// a call to another system runs, however long the call takes. While it
// lasts, a retry of the request answers InFlight (with Result.LeaseLeft);
// once it has run out, because the runner died or could not reach the
// database, a retry takes the request over and resumes it, and the old
// runner's next phase, or its call, fails with ErrLeaseLost. Leases run on
// the database's clock, read by the statements that set and compare them,
// not on WithClock's. The default is DefaultLease, 10 seconds: a shorter
// lease recovers sooner from a dead runner, and renews more often; a phase
// must still commit within d. d must be at least a millisecond.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: lease %v, want at least 1ms", ErrInvalidArgument, d)
		}
		c.lease = d
		return nil
	}
}

// WithTable sets the table that holds the records. The default is
// DefaultTable, "idempotency_keys". The name is an identifier of letters,
// digits and underscores that does not start with a digit, at most 48 bytes,
// optionally qualified by a schema ("billing.idempotency_keys"). Anything
// else makes New fail, so configuration can never inject SQL.
func WithTable(name string) Option {
	return func(c *config) error {
		if err := validateTable(name); err != nil {
			return err
		}
		c.table = name
		return nil
	}
}

// WithRetention sets how long a record counts after its key was claimed. A
// request with the same key within the window replays (or is a mismatch);
// after it, the key is claimed anew and the request runs again. The window
// is part of the API's contract with its clients: document it. The default is
// DefaultRetention, 24 hours. It must be positive.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: retention must be positive, got %v", ErrInvalidArgument, d)
		}
		c.retention = d
		return nil
	}
}

// WithLockTimeout sets how long a claim waits for another transaction that
// holds the same key, uncommitted, before Do (or DoTx, or Run) answers
// InFlight. If the other transaction commits within the wait, the call
// replays its response; if it rolls back, the call claims the key.
//
// The default, DefaultLockTimeout, is one second: most requests finish
// within it, so a client that retries too early still gets the original
// response instead of a 409, while a duplicate never holds a connection
// longer than that. Zero means do not wait. The MySQL family counts lock
// waits in whole seconds, so its dialects round up, and MySQL and TiDB wait
// one second at least, also for zero (see dialect.Capabilities.MinLockWait); SQLite
// serialises writing transactions before they start, so there the wait is
// the busy timeout of the connection instead.
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: lock timeout must not be negative, got %v", ErrInvalidArgument, d)
		}
		c.lockTimeout = d
		return nil
	}
}

// WithClock sets the clock that stamps records and judges their expiry. The
// default is time.Now. All the processes that share a table should use
// clocks that agree: a record expires when the clock of the process that
// next claims its key says so. The leases of multi-step requests do not run
// on it but on the database's clock (see WithLease), so that a process
// whose clock runs ahead never takes a live request over.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidArgument)
		}
		c.clock = now
		return nil
	}
}

// WithMaxResponseBytes sets the largest response a Store keeps, counting the
// body and the encoded header. A larger response makes Do fail with
// ErrResponseTooLarge rather than commit an effect whose retry could not be
// answered. The default is DefaultMaxResponseBytes, 1 MiB. It must be
// positive; mind the database's own packet limits (MySQL's
// max_allowed_packet) when raising it.
func WithMaxResponseBytes(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("%w: max response bytes must be positive, got %d", ErrInvalidArgument, n)
		}
		c.maxResponseBytes = n
		return nil
	}
}

// WithObserver adds a function that receives an Event after every call of
// Do, DoTx and Run, for metrics and logs: the outcome or error, how long the
// call took, how long the claim of Do and DoTx waited, how many
// transactions DoTx ran; and one at each takeover, lost lease, resume and
// compensation of a multi-step request (see EventKind). Events name the key
// only by a hash, and the client by the scope of the call's context
// (Event.Scope). Observers run in the goroutine of the call they report
// (Do, DoTx, Run, or Resume's Resume), before it returns, in the order
// they were added, so keep them quick. The default is no observer, which
// costs nothing.
func WithObserver(observe func(context.Context, Event)) Option {
	return func(c *config) error {
		if observe == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidArgument)
		}
		c.observers = append(c.observers, observe)
		return nil
	}
}

// maxIdentBytes leaves room for the index name, table + "_expires_at", within
// the 63 bytes PostgreSQL allows.
const maxIdentBytes = 48

func validateTable(name string) error {
	parts := strings.Split(name, ".")
	ok := len(parts) <= 2
	for _, part := range parts {
		ok = ok && isIdent(part) && len(part) <= maxIdentBytes
	}
	if !ok {
		return fmt.Errorf("%w: table name %q: want letters, digits and underscores, at most %d bytes, optionally schema-qualified", ErrInvalidArgument, name, maxIdentBytes)
	}
	return nil
}
