package idem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemgo/idem/driver"
)

// Unfinished is a multi-step request (see Store.Run) that has not reached
// its final response.
type Unfinished struct {
	Key string
	// Shard is the request's shard value (WithShardColumn), as the Store
	// binds it, the kind's one Go value (see ShardKind) whatever the
	// driver read; nil in a table without a shard column. Resume puts it
	// in the context of the request's steps (ShardFrom).
	Shard any
	// Phase is the request's recovery point, the last step it committed;
	// empty when it has committed none yet.
	Phase     string
	CreatedAt time.Time
	// LeaseUntil is when the lease of the call that runs it runs out, by
	// the database's clock, which decides leases (see WithLease).
	LeaseUntil time.Time
	// LeaseLeft is how long that lease still ran when the list was read,
	// by the same clock: 0 or less when no call runs the request now.
	LeaseLeft time.Duration
	// ResumeIn is how long after the list was read Resume, with its
	// defaults, takes the request: once the request is DefaultResumeAge
	// old, by the Store's clock, and once its lease has run out and,
	// after Resume failed to finish it, a back-off that doubles with
	// each failure, from 10 seconds up to 15 minutes, by the database's.
	// 0 or less when Resume would take it then. A Resume given
	// ResumeOlderThan takes it after ResumeInOlderThan of that age. The
	// request's client may retry it whenever the lease has run out.
	ResumeIn time.Duration
	// Incarnation is the incarnation of the request's record (see
	// Result.Incarnation): 0 for a record created before its table had
	// the column.
	Incarnation int64

	// heldFor is how long the lease and the back-off still kept the
	// request from Resume when the list was read, by the database's
	// clock; listedAt is when that was, by the Store's.
	heldFor     time.Duration
	listedAt    time.Time
	requestHash []byte
}

// ResumeInOlderThan is ResumeIn for a Resume given ResumeOlderThan(age):
// how long after the list was read such a Resume takes the request, the
// later of the moment the request is age old, by the Store's clock, and
// the end of its lease and back-off, by the database's. 0 or less when it
// would take it then. A service that resumes with another age than
// DefaultResumeAge asks with its own, as idem unfinished -resume-age does.
func (u Unfinished) ResumeInOlderThan(age time.Duration) time.Duration {
	return max(u.heldFor, u.CreatedAt.Add(age).Sub(u.listedAt))
}

// Unfinished lists, oldest first, at most limit multi-step requests that
// are unfinished and were created at least olderThan ago, by the Store's
// clock, as `idem unfinished` shows them: those that a runner holds and
// those that Resume leaves alone after a failure are listed too, and
// LeaseLeft and ResumeIn tell them apart. It returns ErrNoSteps for a
// dialect without multi-step requests.
func (s *Store) Unfinished(ctx context.Context, db *sql.DB, olderThan time.Duration, limit int) ([]Unfinished, error) {
	return unfinished(ctx, s, sqlOn(db, nil), olderThan, limit)
}

// unfinished is Unfinished on any driver's database.
func unfinished(ctx context.Context, s *Store, db driver.Tx, olderThan time.Duration, limit int) ([]Unfinished, error) {
	if err := s.on(db, "database"); err != nil {
		return nil, err
	}
	return s.listUnfinished(ctx, db, olderThan, limit, false)
}

// listUnfinished is Unfinished, or, with resumable, the list without the
// requests that a live lease or a back-off keeps from Resume.
func (s *Store) listUnfinished(ctx context.Context, db driver.Tx, olderThan time.Duration, limit int, resumable bool) ([]Unfinished, error) {
	switch {
	case limit < 1:
		return nil, fmt.Errorf("%w: limit %d, want 1 or more", ErrInvalidArgument, limit)
	case olderThan < 0:
		return nil, fmt.Errorf("%w: age %v, want 0 or more", ErrInvalidArgument, olderThan)
	case s.steps == nil:
		return nil, fmt.Errorf("%w: %s", ErrNoSteps, s.d.Name())
	}
	listedAt := s.clock()
	v := &values{expiresAt: never, createdAt: listedAt.Add(-olderThan).UnixMicro(), limit: int64(limit), clockOffset: s.dbClockOffset()}
	st := s.steps.unfinished
	if resumable {
		st = s.steps.resumable
	}
	var list []Unfinished
	err := db.Query(ctx, st.query, st.args(v), func(scan func(dest ...any) error) error {
		var (
			u                            Unfinished
			key                          []byte
			created, lease, backoff, now int64
		)
		dest := s.withIncarnation([]any{&key, &u.Phase, &created, &lease, &u.requestHash, &backoff, &now, &u.Incarnation})
		if s.sharded() {
			dest = append([]any{&u.Shard}, dest...)
		}
		if err := scan(dest...); err != nil {
			return err
		}
		if s.sharded() {
			shard, err := s.scannedShard(u.Shard)
			if err != nil {
				return err
			}
			u.Shard = shard
		}
		u.Key, u.CreatedAt, u.LeaseUntil = string(key), time.UnixMicro(created), time.UnixMicro(lease)
		u.LeaseLeft = time.Duration(lease-now) * time.Microsecond
		u.heldFor, u.listedAt = time.Duration(lease+backoff-now)*time.Microsecond, listedAt
		u.ResumeIn = u.ResumeInOlderThan(DefaultResumeAge)
		list = append(list, u)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("idem: list unfinished requests: %w", err)
	}
	return list, nil
}

// Defaults of Resume.
const (
	// DefaultResumeAge is how long a request must have stood unfinished
	// before Resume takes it, unless ResumeOlderThan says otherwise: long
	// enough for its client's own retries, which can take a dead runner's
	// request over after a DefaultLease.
	DefaultResumeAge = time.Minute
	// DefaultResumeBatch is how many requests one Resume takes, unless
	// ResumeBatch says otherwise.
	DefaultResumeBatch = 100
)

// StepsFunc returns the steps of the unfinished request with key, under the
// names that Run was given; the steps up to its recovery point do not run,
// so they may be left without what only the client's request had.
type StepsFunc func(ctx context.Context, key string) ([]Step, error)

// ResumeOption configures a call of Resume.
type ResumeOption func(*resumeConfig) error

type resumeConfig struct {
	minAge     time.Duration
	batch      int
	giveUp     time.Duration
	compensate func(ctx context.Context, tx any, req Unfinished, cause error) (Response, error)
	tx         txType // the type of transaction that compensate takes
}

// ResumeOlderThan makes Resume take only the requests unfinished for at
// least d, by the Store's clock. The default is DefaultResumeAge.
// Unfinished.ResumeInOlderThan(d) says when such a Resume takes a request.
func ResumeOlderThan(d time.Duration) ResumeOption {
	return func(c *resumeConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: age %v, want 0 or more", ErrInvalidArgument, d)
		}
		c.minAge = d
		return nil
	}
}

// ResumeBatch makes Resume take at most n requests. The default is
// DefaultResumeBatch.
func ResumeBatch(n int) ResumeOption {
	return func(c *resumeConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: batch %d, want 1 or more", ErrInvalidArgument, n)
		}
		c.batch = n
		return nil
	}
}

// Compensate makes Resume end, with fn, a request that cannot go forward
// once it is older than after (one hour is a common choice): fn runs in a
// transaction of the request's, undoes there what it can of the committed
// phases (and calls other systems to undo theirs), and returns the failure
// to store as the final response. cause is why the request could not go
// forward. Without it, such a request stays unfinished, backed off. TX is
// the driver's transaction, as for Phase.
func Compensate[TX any](after time.Duration, fn func(ctx context.Context, tx TX, req Unfinished, cause error) (Response, error)) ResumeOption {
	return func(c *resumeConfig) error {
		switch {
		case after <= 0:
			return fmt.Errorf("%w: Compensate after %v, want a positive age", ErrInvalidArgument, after)
		case fn == nil:
			return fmt.Errorf("%w: Compensate with a nil function", ErrInvalidArgument)
		}
		c.giveUp, c.tx = after, txTypeOf[TX]()
		c.compensate = func(ctx context.Context, tx any, req Unfinished, cause error) (Response, error) {
			return fn(ctx, tx.(TX), req, cause)
		}
		return nil
	}
}

// ResumeReport counts what one Resume did.
type ResumeReport struct {
	// Finished requests ran their remaining steps to the final response;
	// Compensated ones ended through Compensate.
	Finished, Compensated int
	// Busy requests were taken or finished by another call between the
	// listing and their resume. The requests that a live runner holds
	// are not listed at all.
	Busy int
	// Failed requests stay unfinished, for a later Resume; the error of
	// Resume says why, request by request.
	Failed int
}

// Resume drives to an end the multi-step requests that their clients left
// unfinished: a client that gave up, a process that died between two
// phases. The service calls it on a schedule, since it needs the service's
// own steps, which steps gives: each call takes a batch of requests
// unfinished for long enough (ResumeOlderThan) whose lease has run out,
// oldest first, and runs each forward through its remaining steps, in
// transactions that begin on db with opts, as a retry of its client would.
// A request whose remaining steps fail, or whose steps cannot be given, is
// left alone for a back-off that doubles with each failure (see
// Unfinished.ResumeIn), kept in its record, so that requests that keep
// failing never crowd out those that would finish; once it is old enough,
// Compensate, if given, ends it with a stored failure.
//
// Its error joins those of the requests that failed, each naming its key;
// the others are counted in the report all the same. The observers get
// each request's answer as an Event of kind EventResume.
//
// The steps of a resumed request, and Compensate, find its Identity in
// their context as a client's retry would, with the shard value as
// Unfinished.Shard gives it, but with no client's scope: Resume serves no
// client, and the scope of its requests' Identity and Events is the one
// that ctx names (WithScope), empty unless the caller set one.
func (s *Store) Resume(ctx context.Context, db *sql.DB, opts *sql.TxOptions, steps StepsFunc, options ...ResumeOption) (ResumeReport, error) {
	return resume(ctx, s, sqlOn(db, opts), steps, options...)
}

// resume is Resume on any driver's database.
func resume[TX any](ctx context.Context, s *Store, db driver.DB[TX], steps StepsFunc, options ...ResumeOption) (ResumeReport, error) {
	var rep ResumeReport
	if err := s.on(db, "database"); err != nil {
		return rep, err
	}
	c := resumeConfig{minAge: DefaultResumeAge, batch: DefaultResumeBatch}
	for _, o := range options {
		if o == nil {
			continue
		}
		if err := o(&c); err != nil {
			return rep, err
		}
	}
	switch {
	case steps == nil:
		return rep, fmt.Errorf("%w: Resume without steps", ErrInvalidArgument)
	case c.compensate != nil && c.tx != txTypeOf[TX]():
		return rep, fmt.Errorf("%w: Compensate takes a transaction of type %v, and Resume runs on a driver whose transactions are %v", ErrInvalidArgument, c.tx, txTypeOf[TX]())
	}
	list, err := s.listUnfinished(ctx, db, c.minAge, c.batch, true)
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, u := range list {
		if err := ctx.Err(); err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		ctx := ctx
		if u.Shard != nil {
			ctx = WithShard(ctx, u.Shard)
		}
		if err := resumeOne(ctx, s, db, &c, steps, u, &rep); err != nil {
			rep.Failed++
			if berr := s.backOff(ctx, db, u); berr != nil {
				err = errors.Join(err, berr)
			}
			errs = append(errs, fmt.Errorf("key %q at step %q: %w", u.Key, u.Phase, err))
		}
	}
	return rep, errors.Join(errs...)
}

// resumeOne drives one request to an end, and counts it in rep unless it
// fails.
func resumeOne[TX any](ctx context.Context, s *Store, db driver.DB[TX], c *resumeConfig, stepsOf StepsFunc, u Unfinished, rep *ResumeReport) error {
	steps, cause := stepsOf(ctx, u.Key)
	if cause == nil {
		res, err := runSteps(ctx, s, db, u.Key, u.requestHash, steps, EventResume)
		switch {
		case err != nil:
			cause = err
		case res.Outcome == Claimed:
			rep.Finished++
			return nil
		default: // finished or taken by another call meanwhile
			rep.Busy++
			return nil
		}
	}
	if c.compensate == nil || s.clock().Sub(u.CreatedAt) < c.giveUp {
		return cause
	}
	claimed, err := compensate(ctx, s, db, u, func(ctx context.Context, tx any) (Response, error) {
		return c.compensate(ctx, tx, u, cause)
	})
	switch {
	case err != nil:
		return fmt.Errorf("compensate: %w (after: %w)", err, cause)
	case claimed:
		rep.Compensated++
	default:
		rep.Busy++
	}
	return nil
}

// backOff notes that Resume failed to finish the request u: the next
// calls leave it alone for longer (see Unfinished.ResumeIn). It runs even if
// ctx is done, so that a failure is never forgotten.
func (s *Store) backOff(ctx context.Context, db driver.Tx, u Unfinished) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	if _, err := s.exec(ctx, db, s.steps.backoff, &values{key: []byte(u.Key), shard: u.Shard}); err != nil {
		return fmt.Errorf("note the failure: %w", err)
	}
	return nil
}

// compensate ends the unfinished request u with fn's response, in a
// transaction of its own, after taking it over; claimed is false when
// another call had it, or finished it, first. The observers get an
// EventCompensate when it stored the response or failed.
func compensate[TX any](ctx context.Context, s *Store, db driver.DB[TX], u Unfinished, fn func(ctx context.Context, tx any) (Response, error)) (claimed bool, err error) {
	r := &stepRun[TX]{s: s, db: db, key: u.Key, shard: u.Shard, reqHash: u.requestHash, anyPoint: true}
	defer func() {
		if claimed || err != nil {
			s.emit(ctx, u.Key, Event{Kind: EventCompensate, Outcome: Claimed, Err: err})
		}
	}()
	t, err := retrying(ctx, r.begin)
	if err != nil || t.res.Outcome != Claimed {
		return false, err
	}
	_, err = retrying(s.work(ctx, u.Key, r.v), r.phase(compensatedPhase, func(ctx context.Context, tx any) (*Response, error) {
		resp, err := fn(ctx, tx)
		return &resp, err
	}))
	if err != nil {
		r.release(ctx)
		return false, err
	}
	return true, nil
}

// compensatedPhase is the recovery point of a request that Compensate
// ended; the name has a character that step names cannot have.
const compensatedPhase = "idem:compensated"
