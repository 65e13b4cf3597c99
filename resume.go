package idem

import (
	"cmp"
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
	// ResumeIn is how long a Resumer still leaves the request alone, by
	// the same clock: the lease left, and after the Resumer failed to
	// finish it, a back-off that doubles with each failure, from 10
	// seconds up to 15 minutes. 0 or less when a Resumer would take it.
	// The request's client may retry it whenever the lease has run out.
	ResumeIn time.Duration

	requestHash []byte
}

// Unfinished lists, oldest first, at most limit multi-step requests that
// are unfinished and were created at least olderThan ago, by the Store's
// clock, as `idem unfinished` shows them: those that a runner holds and
// those that a Resumer leaves alone after a failure are listed too, and
// LeaseLeft and ResumeIn tell them apart. It returns ErrNoSteps for a
// dialect without multi-step requests.
func (s *Store) Unfinished(ctx context.Context, db *sql.DB, olderThan time.Duration, limit int) ([]Unfinished, error) {
	return s.unfinished(ctx, db, olderThan, limit, false)
}

// unfinished is Unfinished, or, with resumable, the list without the
// requests that a live lease or a back-off keeps from a Resumer.
func (s *Store) unfinished(ctx context.Context, db *sql.DB, olderThan time.Duration, limit int, resumable bool) ([]Unfinished, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	switch {
	case db == nil:
		return nil, fmt.Errorf("%w: nil database", ErrInvalidArgument)
	case limit < 1:
		return nil, fmt.Errorf("%w: limit %d, want 1 or more", ErrInvalidArgument, limit)
	case olderThan < 0:
		return nil, fmt.Errorf("%w: age %v, want 0 or more", ErrInvalidArgument, olderThan)
	case s.steps == nil:
		return nil, fmt.Errorf("%w: %s", ErrNoSteps, s.d.Name())
	}
	v := &values{expiresAt: never, createdAt: s.clock().Add(-olderThan).UnixMicro(), limit: int64(limit), clockOffset: s.dbClockOffset()}
	st := s.steps.unfinished
	if resumable {
		st = s.steps.resumable
	}
	var list []Unfinished
	err := sqlDB{db: db}.Query(ctx, st.query, st.args(v), func(scan func(dest ...any) error) error {
		var (
			u                            Unfinished
			key                          []byte
			created, lease, backoff, now int64
		)
		if err := scan(&key, &u.Phase, &created, &lease, &u.requestHash, &backoff, &now); err != nil {
			return err
		}
		u.Key, u.CreatedAt, u.LeaseUntil = string(key), time.UnixMicro(created), time.UnixMicro(lease)
		u.LeaseLeft = time.Duration(lease-now) * time.Microsecond
		u.ResumeIn = time.Duration(lease+backoff-now) * time.Microsecond
		list = append(list, u)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("idem: list unfinished requests: %w", err)
	}
	return list, nil
}

// Defaults of a Resumer.
const (
	// DefaultResumeAge is how long a request must have stood unfinished
	// before a Resumer takes it, unless MinAge says otherwise: long
	// enough for its client's own retries, which can take a dead runner's
	// request over after a DefaultLease.
	DefaultResumeAge = time.Minute
	// DefaultGiveUpAfter is how old a request must be before a failure
	// makes a Resumer compensate it, unless GiveUpAfter says otherwise.
	DefaultGiveUpAfter = time.Hour
	// DefaultResumeBatch is how many requests one Resume takes, unless
	// Batch says otherwise.
	DefaultResumeBatch = 100
)

// Resumer drives to an end the multi-step requests that their clients left
// unfinished: a client that gave up, a process that died between two
// phases. The service runs it on a schedule, since it needs the service's
// own steps: each call of Resume takes a batch of requests unfinished for
// longer than MinAge whose lease has run out, oldest first, and runs each
// forward through its remaining steps, as a retry of its client would. A
// request whose remaining steps fail, or whose steps cannot be given, is
// left alone for a back-off that doubles with each failure (see
// Unfinished.ResumeIn), kept in its record, so that requests that keep
// failing never crowd out those that would finish; once it is older than
// GiveUpAfter, Compensate, if set, ends it with a stored failure.
type Resumer struct {
	Store *Store
	DB    *sql.DB

	// Steps returns the steps of the request with key, under the names
	// that Run was given; the steps up to its recovery point do not run,
	// so they may be left without what only the client's request had.
	Steps func(ctx context.Context, key string) ([]Step, error)

	// Compensate, if set, ends a request that cannot go forward: it runs
	// in a transaction of the request's, undoes there what it can of the
	// committed phases (and calls other systems to undo theirs), and
	// returns the failure to store as the final response. cause is why
	// the request could not go forward.
	Compensate func(ctx context.Context, tx *sql.Tx, req Unfinished, cause error) (Response, error)

	// TxOptions are the options of the transactions of the requests'
	// steps and of Compensate, as Run's opts; nil is the database's
	// default.
	TxOptions *sql.TxOptions

	// MinAge, GiveUpAfter and Batch are DefaultResumeAge,
	// DefaultGiveUpAfter and DefaultResumeBatch when zero.
	MinAge, GiveUpAfter time.Duration
	Batch               int
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
	// Failed requests stay unfinished, for the next Resume; the error of
	// Resume says why, request by request.
	Failed int
}

// Resume takes one batch of unfinished requests and drives each to an end
// (see Resumer). Its error joins those of the requests that failed, each
// naming its key; the others are counted in the report all the same.
func (r *Resumer) Resume(ctx context.Context) (ResumeReport, error) {
	var rep ResumeReport
	switch {
	case r.Store == nil || r.DB == nil:
		return rep, fmt.Errorf("%w: Resumer without a Store or a database", ErrInvalidArgument)
	case r.Steps == nil:
		return rep, fmt.Errorf("%w: Resumer without Steps", ErrInvalidArgument)
	}
	list, err := r.Store.unfinished(ctx, r.DB, cmp.Or(r.MinAge, DefaultResumeAge), cmp.Or(r.Batch, DefaultResumeBatch), true)
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, u := range list {
		if err := ctx.Err(); err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		if err := r.resume(ctx, u, &rep); err != nil {
			rep.Failed++
			if berr := r.Store.backOff(ctx, r.DB, u.Key); berr != nil {
				err = errors.Join(err, berr)
			}
			errs = append(errs, fmt.Errorf("key %q at step %q: %w", u.Key, u.Phase, err))
		}
	}
	return rep, errors.Join(errs...)
}

// resume drives one request to an end, and counts it in rep unless it
// fails.
func (r *Resumer) resume(ctx context.Context, u Unfinished, rep *ResumeReport) error {
	s := r.Store
	steps, cause := r.Steps(ctx, u.Key)
	if cause == nil {
		// The observers get the answer as an EventResume: it is no
		// client's call.
		res, err := run(ctx, s, driver.DB[*sql.Tx](sqlDB{r.DB, r.TxOptions}), u.Key, u.requestHash, steps, EventResume)
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
	if r.Compensate == nil || s.clock().Sub(u.CreatedAt) < cmp.Or(r.GiveUpAfter, DefaultGiveUpAfter) {
		return cause
	}
	claimed, err := s.compensate(ctx, r.DB, r.TxOptions, u, func(ctx context.Context, tx *sql.Tx) (Response, error) {
		return r.Compensate(ctx, tx, u, cause)
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

// backOff notes that a Resumer failed to finish the request of key: the
// next Resumes leave it alone for longer (see Unfinished.ResumeIn). It runs
// even if ctx is done, so that a failure is never forgotten.
func (s *Store) backOff(ctx context.Context, db *sql.DB, key string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	if _, err := s.exec(ctx, sqlDB{db: db}, s.steps.backoff, &values{key: []byte(key)}); err != nil {
		return fmt.Errorf("note the failure: %w", err)
	}
	return nil
}

// compensate ends the unfinished request u with fn's response, in a
// transaction of its own, after taking it over; claimed is false when
// another call had it, or finished it, first. The observers get an
// EventCompensate when it stored the response or failed.
func (s *Store) compensate(ctx context.Context, db *sql.DB, opts *sql.TxOptions, u Unfinished, fn Func) (claimed bool, err error) {
	r := &stepRun[*sql.Tx]{s: s, db: sqlDB{db, opts}, key: u.Key, reqHash: u.requestHash, anyPoint: true}
	defer func() {
		if claimed || err != nil {
			s.emit(ctx, u.Key, Event{Kind: EventCompensate, Outcome: Claimed, Err: err})
		}
	}()
	t, err := retrying(ctx, r.begin)
	if err != nil || t.res.Outcome != Claimed {
		return false, err
	}
	_, err = retrying(ctx, r.phase(compensatedPhase, func(ctx context.Context, tx any) (*Response, error) {
		resp, err := fn(ctx, tx.(*sql.Tx))
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
