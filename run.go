package idem

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/driver"
)

// Step is one step of a multi-step request (see Store.Run): a local phase,
// made with Phase or Final, or a call to another system, made with Call.
// The zero Step is not a step; Run refuses it.
type Step struct {
	name string
	// phase runs a Phase or Final step in tx, the driver's own
	// transaction, and returns the final response if the step gave one.
	phase func(ctx context.Context, tx any) (*Response, error)
	// tx is the type of transaction that phase takes.
	tx    txType
	final bool
	call  func(ctx context.Context, callKey string) error
}

// Phase is a local step: fn runs in a transaction of its own, which Run
// commits with fn's writes and the request's new recovery point, name. A
// retry that resumes the request never runs a committed phase again. fn
// may end the request early by returning Finish(resp): its writes commit
// with resp as the final response. As a Func, fn returns the errors of its
// statements and never commits or rolls back tx itself.
//
// TX is the driver's transaction, *sql.Tx for Store.Run, and pgx.Tx for
// package idempgx: Run refuses a step of another driver's.
func Phase[TX any](name string, fn func(ctx context.Context, tx TX) error) Step {
	if fn == nil {
		return Step{name: name}
	}
	return Step{name: name, tx: txTypeOf[TX](), phase: func(ctx context.Context, tx any) (*Response, error) {
		err := fn(ctx, tx.(TX))
		var f *finish
		if errors.As(err, &f) {
			return &f.resp, nil
		}
		return nil, err
	}}
}

// Final is the last step of every multi-step request: a phase whose
// response is stored, in its transaction, as the request's final response,
// and replayed as Do replays. TX is as for Phase.
func Final[TX any](name string, fn func(ctx context.Context, tx TX) (Response, error)) Step {
	if fn == nil {
		return Step{name: name, final: true}
	}
	return Step{name: name, final: true, tx: txTypeOf[TX](), phase: func(ctx context.Context, tx any) (*Response, error) {
		resp, err := fn(ctx, tx.(TX))
		if err != nil {
			return nil, err
		}
		return &resp, nil
	}}
}

// txType is a type of transaction, the TX of a step or of Compensate, or
// that of a driver, told apart without reflection: it holds a nil *TX
// (txTypeOf), which equals another txType's exactly when both are of one
// TX, and which fmt's %T names.
type txType struct{ nilPtr any }

// txTypeOf is TX as a txType.
func txTypeOf[TX any]() txType { return txType{nilPtr: (*TX)(nil)} }

// String names the type, as Go spells it: "*sql.Tx", "pgx.Tx".
func (t txType) String() string { return strings.TrimPrefix(fmt.Sprintf("%T", t.nilPtr), "*") }

// Call is a step that calls another system, between two phases and
// outside any transaction. fn gets callKey, the call key of the step for
// the request's record (Identity.CallKey), to send as its idempotency key:
// a call runs again when the request is resumed before the next phase
// committed, with the same call key, and the other system must then answer
// it as a retry; a new request with the key, once the record was
// forgotten, released or expired, or another customer's (WithShardColumn),
// sends another. Whatever a later step needs from the answer, the next
// phase stores. fn may end the request by returning Finish(resp), as for a
// declined card: resp is stored as the final response in a transaction of
// its own.
func Call(name string, fn func(ctx context.Context, callKey string) error) Step {
	return Step{name: name, call: fn}
}

// Finish ends a multi-step request early, from a Phase or a Call, with resp
// as its final response (see there). Returned from a Func, it is an
// ordinary error.
func Finish(resp Response) error { return &finish{resp: resp} }

type finish struct{ resp Response }

// Finished returns the response that err carries when it is Finish's,
// wrapped or not. An adapter that builds a request's steps from the
// request (idemhttp's Middleware.Steps, idemgrpc's Run) lets its builder
// refuse a request with Finish before any step runs, and answers it with
// this response, stored nowhere.
func Finished(err error) (Response, bool) {
	var f *finish
	if errors.As(err, &f) {
		return f.resp, true
	}
	return Response{}, false
}

func (f *finish) Error() string {
	return fmt.Sprintf("idem: request finished early with status %d", f.resp.Status)
}

// CallKey returns the call key of the step named step of the request with
// key in the form without an incarnation: "idem-" followed by the first 16
// bytes, in lower-case hex, of the SHA-256 of key, a zero byte and step.
// Run sends it for a record without an incarnation, created before its
// table had the column, which is the key that such a request sent before
// the upgrade; a caller that derives call keys of its own, outside Run,
// may use it. It is stable across versions, so that any service can
// compute it, and says nothing of key. For every other record, Run sends
// Identity.CallKey, which tells the records of one key apart: a request
// after Forget, ReleaseUndone or an expiry, and another customer's.
func CallKey(key, step string) string {
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(step))
	return "idem-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// MaxStepNameBytes is the longest step name, stored as the recovery point.
const MaxStepNameBytes = 64

// never is the expiry of an unfinished multi-step request: Purge and the
// takeover of expired keys leave it alone until it finishes.
const never = math.MaxInt64

// Run runs a request made of several steps, for work that calls other
// systems (a payment provider, a mail service) and so cannot live in one
// transaction. Its steps run in order: each Phase in a transaction of its
// own that commits with the request's recovery point, each Call between
// them, and the Final phase, whose response is stored with the record of
// key and replayed as Do replays.
//
// Run answers as DoTx does: Claimed when this call ran the request to its
// end, Replay, Mismatch, or InFlight while another call runs it. A retry of
// an unfinished request resumes it after its last committed phase, and
// never runs a committed phase again. When a step fails, Run returns its
// error and gives up its lease, so that a retry resumes at once; the
// request stays unfinished. When the call that ran it died instead, a retry
// takes it over once its lease has run out (see WithLease).
//
// A commit whose reply is lost is settled as DoTx settles it: Run looks the
// record up, goes on when the commit happened, and runs the transaction
// again when it did not. When the lookup fails too, Run returns
// ErrCommitUnknown and gives up its lease, so that a retry resumes the
// request at once from wherever it stands.
//
// The record is committed with the first transaction, before any step, and
// it does not expire while the request is unfinished: Purge and the
// takeover of expired keys leave it alone. A finished request is kept for
// the retention window (WithRetention) from when it finished. Do and DoTx
// answer InFlight for a key whose request is unfinished.
//
// Each transaction of Run begins on db with opts, as DoTx's does; nil is
// the database's default. Each step's context carries the request's
// Identity (IdentityFrom), by which a phase keys the rows it writes.
//
// The steps' names must be distinct, of letters, digits, '.', '_' and '-',
// at most MaxStepNameBytes long; the last step, and only it, is a Final.
// Resuming needs the steps of the run that began the request, up to its
// recovery point: rename or remove a step only once no request is
// unfinished past it.
func (s *Store) Run(ctx context.Context, db *sql.DB, opts *sql.TxOptions, key string, reqHash []byte, steps ...Step) (Result, error) {
	return run(ctx, s, sqlOn(db, opts), key, reqHash, steps)
}

// run is Run on any driver's database.
func run[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string, reqHash []byte, steps []Step) (Result, error) {
	if err := s.on(db, "database"); err != nil {
		return Result{}, err
	}
	return runSteps(ctx, s, db, key, reqHash, steps, EventCall)
}

// runSteps is Run after the Store and the database were checked, whose
// answer the observers get as an Event of kind: Resume's runs are told
// apart by theirs.
func runSteps[TX any](ctx context.Context, s *Store, db driver.DB[TX], key string, reqHash []byte, steps []Step, kind EventKind) (Result, error) {
	if err := validateCall(key, reqHash, false); err != nil {
		return Result{}, err
	}
	if err := validateSteps(steps, txTypeOf[TX]()); err != nil {
		return Result{}, err
	}
	if s.steps == nil {
		return Result{}, fmt.Errorf("%w: %s", ErrNoSteps, s.d.Name())
	}
	shard, err := s.shardOf(ctx)
	if err != nil {
		return Result{}, err
	}
	r := &stepRun[TX]{s: s, db: db, key: key, shard: shard, reqHash: reqHash, steps: steps}
	return r.observed(ctx, kind)
}

// validateSteps checks steps for a run on a driver whose transactions are
// of type tx.
func validateSteps(steps []Step, tx txType) error {
	if len(steps) == 0 {
		return fmt.Errorf("%w: no steps", ErrInvalidArgument)
	}
	seen := make(map[string]bool, len(steps))
	for i, st := range steps {
		if err := validateStepName(st.name); err != nil {
			return fmt.Errorf("%w: step %d: %w", ErrInvalidArgument, i, err)
		}
		if seen[st.name] {
			return fmt.Errorf("%w: two steps named %q", ErrInvalidArgument, st.name)
		}
		seen[st.name] = true
		switch {
		case st.phase == nil && st.call == nil:
			return fmt.Errorf("%w: step %q has no function", ErrInvalidArgument, st.name)
		case st.final != (i == len(steps)-1):
			return fmt.Errorf("%w: step %q: the last step, and only it, must be a Final", ErrInvalidArgument, st.name)
		case st.phase != nil && st.tx != tx:
			return fmt.Errorf("%w: step %q takes a transaction of type %v, and the request runs on a driver whose transactions are %v", ErrInvalidArgument, st.name, st.tx, tx)
		}
	}
	return nil
}

func validateStepName(name string) error {
	if len(name) == 0 || len(name) > MaxStepNameBytes {
		return fmt.Errorf("name of %d bytes, want 1 to %d", len(name), MaxStepNameBytes)
	}
	for _, c := range []byte(name) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("name %q: want letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// stepRun is one call of Run, on a driver whose transactions are of type
// TX.
type stepRun[TX any] struct {
	s       *Store
	db      driver.DB[TX]
	key     string
	shard   any // the shard value, nil in a table without a shard column
	reqHash []byte
	steps   []Step
	// anyPoint takes over a request whatever its recovery point, for
	// Compensate, which runs none of its steps.
	anyPoint bool
	// v holds the values of the claim that owns the request, once it
	// does: its token fences every phase.
	v *values
	// late holds the tokens of this call's commits whose reply was lost
	// and that the lookup did not find: such a commit may still land
	// after it, and a record that carries one of them is this call's own.
	late []int64
}

// observed runs r and hands the observers its answer as an Event of kind.
func (r *stepRun[TX]) observed(ctx context.Context, kind EventKind) (Result, error) {
	start := r.s.startEvent()
	res, err := r.run(ctx)
	if err != nil {
		res = Result{}
	}
	if start.IsZero() {
		return res, err
	}
	r.s.emit(ctx, r.key, Event{Kind: kind, Outcome: res.Outcome, Err: err, Duration: time.Since(start), Attempts: 1})
	return res, err
}

// run takes the request, or answers from its record, and runs its steps
// from where it stands, in the context of the request's work.
func (r *stepRun[TX]) run(ctx context.Context) (Result, error) {
	t, err := retrying(ctx, r.begin)
	if err != nil && r.v != nil {
		r.release(ctx) // the first transaction's outcome is unknown
	}
	if err != nil || t.res.Outcome != Claimed {
		return t.res, err
	}
	res := t.res
	work := r.s.work(ctx, r.key, r.v)
	for _, st := range r.steps[t.next:] {
		var resp *Response
		if st.call != nil {
			err = r.call(work, st)
			var f *finish
			switch {
			case errors.Is(err, ErrLeaseLost): // what the call learnt cannot be stored
			case errors.As(err, &f):
				resp, err = retrying(work, r.phase(st.name, func(context.Context, any) (*Response, error) {
					return &f.resp, nil
				}))
			case err != nil:
				err = fmt.Errorf("idem: step %q: %w", st.name, err)
			}
		} else {
			resp, err = retrying(work, r.phase(st.name, st.phase))
		}
		if err != nil {
			if errors.Is(err, ErrLeaseLost) {
				r.s.emit(ctx, r.key, Event{Kind: EventLeaseLost, Step: st.name, Err: err})
			}
			r.release(ctx)
			return Result{}, err
		}
		if resp != nil {
			res.Response = *resp
			res.ExpiresAt = time.UnixMicro(r.v.expiresAt)
			return res, nil
		}
	}
	return Result{}, fmt.Errorf("idem: step %q stored no response", r.steps[len(r.steps)-1].name)
}

// call runs the function of the Call step st, outside any transaction,
// while it keeps the lease: every third of the lease it sets the lease
// again from now, provided the request is still this call's, so that a
// call longer than the lease is not taken over. When the request was taken
// over, or two renewals in a row failed, which leaves a third of the lease,
// it cancels the call's context and returns an error that matches
// ErrLeaseLost: another call may resume the request, and this one must not
// store what it learnt.
func (r *stepRun[TX]) call(ctx context.Context, st Step) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	lost := make(chan error, 1)
	go func() { lost <- r.renew(ctx, st.name, done, cancel) }()
	id, _ := IdentityFrom(ctx) // ctx is the work's (Store.work)
	err := st.call(ctx, id.CallKey(st.name))
	close(done)
	// The renewal has ended before the next statement uses r.v.
	if lerr := <-lost; lerr != nil {
		return lerr
	}
	return err
}

// renew renews the lease of r's request until done is closed or ctx ends,
// and returns the error it cancelled ctx with, if it did.
func (r *stepRun[TX]) renew(ctx context.Context, step string, done <-chan struct{}, cancel context.CancelCauseFunc) error {
	tick := time.NewTicker(max(r.s.lease/3, time.Millisecond))
	defer tick.Stop()
	failed := 0
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return nil // the caller's: the call sees it
		case <-tick.C:
		}
		n, err := r.s.exec(ctx, r.db, r.s.steps.renew, r.v)
		var lost error
		switch {
		case err == nil && n == 1:
			failed = 0
			continue
		case err == nil:
			lost = fmt.Errorf("idem: step %q: %w", step, ErrLeaseLost)
		case ctx.Err() != nil:
			return nil
		default:
			if failed++; failed < 2 {
				continue
			}
			lost = fmt.Errorf("idem: step %q: %w: the lease could not be renewed: %w", step, ErrLeaseLost, err)
		}
		cancel(lost)
		return lost
	}
}

// taken is what the first transaction of Run found: the outcome, and,
// when it is Claimed, the step to run next.
type taken struct {
	res  Result
	next int
}

// begin is the first transaction of Run. It claims the key as Do does,
// and marks a new record as a multi-step request under this call's lease;
// or it finds an unfinished request whose lease has run out and takes it
// over, with a token of its own, to resume it after its recovery point.
// The statement that marks or takes the request goes with the commit.
func (r *stepRun[TX]) begin(ctx context.Context) (taken, error) {
	s := r.s
	v := s.newValues(r.key, r.shard, r.reqHash)
	tx, _, err := r.db.Begin(ctx)
	if err != nil {
		return taken{}, s.wrap("begin", err)
	}
	ended := false
	defer func() {
		if !ended {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	res, claimed, err := s.claimKey(ctx, tx, v, nil)
	if err != nil || (!claimed && res.Outcome != InFlight) {
		return taken{res: res}, err
	}
	v.lease = s.lease.Microseconds()
	next := 0
	var tookOver *progress
	var inFlight Result // the answer when another call takes the request first
	end, op := s.steps.start, "start"
	if claimed {
		v.expiresAt = never
	} else {
		if held, err := r.phaseRuns(ctx, tx, v); held || err != nil {
			return taken{res: res}, err
		}
		p, err := s.progress(ctx, tx, v)
		if err != nil && s.d.Classify(err) == dialect.ErrorLockTimeout {
			return taken{res: res}, nil // a phase that runs holds the row
		}
		if err == nil && p != nil && slices.Contains(r.late, p.token) {
			return r.adopt(p) // an earlier attempt's commit landed late
		}
		if err != nil || p == nil || p.leaseUntil > p.now {
			if p != nil && err == nil {
				res.LeaseLeft = time.Duration(p.leaseUntil-p.now) * time.Microsecond
			}
			return taken{res: res}, err // held by a live runner, or a plain Do in flight
		}
		if !r.anyPoint {
			if next, err = r.resumeAt(p.phase); err != nil {
				return taken{}, err
			}
		}
		v.prevToken, v.incarnation = p.token, p.incarnation
		inFlight = res
		res = Result{Outcome: Claimed, CreatedAt: time.UnixMicro(p.createdAt), Incarnation: p.incarnation, token: v.token}
		tookOver = p
		end, op = s.steps.takeover, "take over"
	}
	ended = true // CommitAfter ends the transaction, whatever it answers
	var cerr *driver.CommitError
	switch err := tx.CommitAfter(ctx, s.query(end, v)); {
	case errors.Is(err, driver.ErrNoRow) && tookOver != nil:
		return taken{res: inFlight}, nil // another call took it first
	case errors.Is(err, driver.ErrNoRow):
		return taken{}, errClaimGone(op)
	case errors.As(err, &cerr):
		if err := r.settleCommit(ctx, v, cerr.Err); err != nil {
			if errors.Is(err, ErrCommitUnknown) {
				v.prevToken = v.token
				r.v = v // for run to give up the lease, should the commit have landed
			}
			return taken{}, err
		}
	case err != nil:
		return taken{}, s.wrap(op, err)
	}
	v.prevToken = v.token
	r.v = v
	res.token, res.ExpiresAt = v.token, time.Time{}
	if tookOver != nil {
		s.emit(ctx, r.key, Event{Kind: EventTakeover, Step: tookOver.phase, Outcome: Claimed})
	}
	return taken{res: res, next: next}, nil
}

// phaseRuns reports whether a phase's transaction holds the key's lock,
// where the dialect has one: a takeover must not wait for it.
func (r *stepRun[TX]) phaseRuns(ctx context.Context, tx driver.Tx, v *values) (bool, error) {
	st := r.s.steps.tryLock
	if st.query == "" {
		return false, nil
	}
	var got bool
	if err := tx.QueryRow(ctx, st.query, st.args(v), &got); err != nil {
		return false, r.s.wrap("lock", err)
	}
	return !got, nil
}

// adopt makes the request of p this call's: a record that an earlier
// attempt of begin committed although its lookup did not find it.
func (r *stepRun[TX]) adopt(p *progress) (taken, error) {
	next, err := r.resumeAt(p.phase)
	if err != nil {
		return taken{}, err
	}
	v := r.s.newValues(r.key, r.shard, r.reqHash)
	v.token, v.prevToken, v.incarnation = p.token, p.token, p.incarnation
	v.lease = r.s.lease.Microseconds()
	r.v = v
	res := Result{Outcome: Claimed, CreatedAt: time.UnixMicro(p.createdAt), Incarnation: p.incarnation, token: p.token}
	return taken{res: res, next: next}, nil
}

// settleCommit settles a commit of Run's that failed with cerr, as DoTx
// does (see findAfterCommit), by the token of the claim or phase that the
// commit would have written. It returns nil when the record carries that
// token, since the commit then happened; an error that matches ErrRetry
// when it did not, for the transaction to run again; and one that matches
// ErrCommitUnknown when the lookup failed too. Under any other token, the
// record is still the one from before the commit, which may yet land.
func (r *stepRun[TX]) settleCommit(ctx context.Context, v *values, cerr error) error {
	rec, err := r.s.findAfterCommit(ctx, r.s.findOutside(r.db), v, cerr)
	if err != nil || (rec != nil && rec.token == v.token) {
		return err
	}
	r.late = append(r.late, v.token)
	return retryError("commit failed, nothing was stored", cerr)
}

// landedLate answers for a phase whose fence found the record under
// another token: when that token is one of this call's commits that a
// lookup did not find, the phase committed after all, and it returns the
// final response it stored, if any, with ok true.
func (r *stepRun[TX]) landedLate(ctx context.Context) (resp *Response, ok bool, err error) {
	if len(r.late) == 0 {
		return nil, false, nil
	}
	rec, err := r.s.findIn(ctx, r.db, r.v.key, r.v.shard)
	if err != nil || rec == nil || !slices.Contains(r.late, rec.token) {
		return nil, false, err
	}
	r.v.token, r.v.prevToken = rec.token, rec.token
	if !rec.finished {
		return nil, true, nil
	}
	stored, err := rec.response(r.v.key)
	if err != nil {
		return nil, false, err
	}
	r.v.expiresAt = rec.expiresAt
	return &stored, true, nil
}

// progress is where an unfinished multi-step request stands, and now, the
// database's clock when it was read, which its lease is compared with; and
// the record's incarnation, which a takeover of the request keeps.
type progress struct {
	phase                                          string
	leaseUntil, token, createdAt, now, incarnation int64
}

// progress reads the progress of v's key in tx: nil when the key has no
// unfinished multi-step request that tx can see.
func (s *Store) progress(ctx context.Context, tx driver.Tx, v *values) (*progress, error) {
	var (
		p     progress
		phase sql.NullString
		lease sql.NullInt64
	)
	v.clockOffset = s.dbClockOffset()
	dest := []any{&phase, &lease, &p.token, &p.createdAt, &p.now, &p.incarnation}
	err := tx.QueryRow(ctx, s.steps.progress.query, s.steps.progress.args(v), s.withIncarnation(dest)...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap("read progress", err)
	}
	p.phase, p.leaseUntil = phase.String, lease.Int64
	return &p, nil
}

// resumeAt returns the index of the step after the recovery point phase;
// "" is the start, before any step.
func (r *stepRun[TX]) resumeAt(phase string) (int, error) {
	if phase == "" {
		return 0, nil
	}
	for i, st := range r.steps {
		if st.name == phase {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: the request stands at step %q, which is not one of the steps given", ErrInvalidArgument, phase)
}

// phase returns one attempt of the transaction of step name. It waits
// for the key's lock where the dialect has one; takes the request with a
// new token, renewing the lease, provided it is still this call's; runs
// body with the driver's transaction; then moves the recovery point to
// name, or stores the final response if body gave one, under the new token,
// which finds the record only if the transaction is still the one that
// began, with the commit.
func (r *stepRun[TX]) phase(name string, body func(context.Context, any) (*Response, error)) func(context.Context) (*Response, error) {
	return func(ctx context.Context) (*Response, error) {
		s, v := r.s, r.v
		tx, _, err := r.db.Begin(ctx)
		if err != nil {
			return nil, s.wrap("begin", err)
		}
		ended := false
		defer func() {
			if !ended {
				_ = tx.Rollback(context.WithoutCancel(ctx))
			}
		}()
		if s.steps.lock.query != "" {
			if _, err := s.exec(ctx, tx, s.steps.lock, v); err != nil {
				return nil, s.wrap("lock", err)
			}
		}
		held := v.token
		v.prevToken, v.token = held, s.newToken()
		committed := false
		defer func() {
			if !committed { // release tries both: a failed commit may have landed
				v.token, v.prevToken = held, v.token
			}
		}()
		v.phase = name
		if n, err := s.exec(ctx, tx, s.steps.advance, v); err != nil || n != 1 {
			if err == nil {
				resp, ok, lerr := r.landedLate(ctx)
				if ok {
					committed = true // the record's token is v's now
					return resp, nil
				}
				if lerr != nil {
					return nil, s.wrap("step "+name+": look up the record", lerr)
				}
			}
			return nil, stepError("step "+name, err, s)
		}
		resp, err := body(ctx, tx.Native())
		if err != nil {
			return nil, s.wrap(fmt.Sprintf("step %q", name), err)
		}
		end := s.steps.mark
		if resp != nil {
			if err := s.prepareResponse(v, *resp); err != nil {
				return nil, err
			}
			v.expiresAt = addMicros(s.clock().UnixMicro(), s.retention)
			end = s.steps.finish
		}
		ended = true // CommitAfter ends the transaction, whatever it answers
		var cerr *driver.CommitError
		switch err := tx.CommitAfter(ctx, s.query(end, v)); {
		case errors.Is(err, driver.ErrNoRow):
			return nil, fmt.Errorf("idem: step %q: %w: the transaction of the step ended before the step did; nothing of it was stored", name, ErrRetry)
		case errors.As(err, &cerr):
			if err := r.settleCommit(ctx, v, cerr.Err); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, s.wrap(fmt.Sprintf("step %q", name), err)
		}
		committed = true
		return resp, nil
	}
}

// release gives up this call's lease after a step failed, so that a retry
// can resume the request at once. It runs even if ctx is done; if it
// fails, the lease runs out by itself.
func (r *stepRun[TX]) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	_, _ = r.s.exec(ctx, r.db, r.s.steps.release, r.v)
}

// stepError is the error of the statement that fences a phase: without an
// error of its own, it changed no row, and the request is no longer this
// call's.
func stepError(op string, err error, s *Store) error {
	if err != nil {
		return s.wrap(op, err)
	}
	return fmt.Errorf("idem: %s: %w", op, ErrLeaseLost)
}
