// Package checkout is the multi-step request that the tests of Run kill
// and resume, on the Store and behind idemhttp and idemgrpc: an
// order, a charge at a payment provider that runs on loopback, and the
// phases that record it, with the points between them at which a test
// kills the service.
package checkout

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// Provider is a payment provider that really runs, on loopback: it charges
// once per idempotency key and answers a repeated call with the charge it
// made. It counts calls and charges apart, by the request's key, which a
// caller sends along in X-Order.
type Provider struct {
	srv *httptest.Server

	mu      sync.Mutex
	charges map[string]string   // by idempotency key
	calls   map[string]int      // by the request's key
	charged map[string]int      // by the request's key
	keys    map[string][]string // by the request's key: the idempotency keys it was taken with, each once
	fail    int
	lose    int
	before  *gate // Hold's: calls wait before they charge
	after   *gate // HoldAnswers': calls wait after they charged
}

// gate holds the calls that reach it until held is closed; reached
// receives once for each call that reaches it while the one before it has
// not been received.
type gate struct {
	held    chan struct{}
	reached chan struct{}
}

// wait holds a call at g, if there is one, until g opens or the call's
// caller gives up; it reports whether the call goes on.
func (g *gate) wait(r *http.Request) bool {
	if g == nil {
		return true
	}
	select {
	case g.reached <- struct{}{}:
	default:
	}
	select {
	case <-g.held:
		return true
	case <-r.Context().Done():
		return false
	}
}

// NewProvider starts a provider, stopped at the end of the test.
func NewProvider(t testing.TB) *Provider {
	p := &Provider{charges: map[string]string{}, calls: map[string]int{}, charged: map[string]int{}, keys: map[string][]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is where the provider takes charges.
func (p *Provider) URL() string { return p.srv.URL }

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	key, order := r.Header.Get("Idempotency-Key"), r.Header.Get("X-Order")
	p.mu.Lock()
	p.calls[order]++
	if p.fail > 0 {
		p.fail--
		p.mu.Unlock()
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	before := p.before
	p.mu.Unlock()
	if !before.wait(r) {
		return
	}
	p.mu.Lock()
	id, ok := p.charges[key]
	if !ok {
		id = fmt.Sprintf("ch_%d", len(p.charges)+1)
		p.charges[key] = id
		p.charged[order]++
	}
	if !slices.Contains(p.keys[order], key) {
		p.keys[order] = append(p.keys[order], key)
	}
	after := p.after
	lost := p.lose > 0
	if lost {
		p.lose--
	}
	p.mu.Unlock()
	if lost {
		http.Error(w, "the provider's answer was lost", http.StatusBadGateway)
		return
	}
	if !after.wait(r) {
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// Counts returns the calls and the charges for the request with key.
func (p *Provider) Counts(key string) (calls, charges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[key], p.charged[key]
}

// Keys returns the idempotency keys of the calls that the provider took
// (all but those FailNext failed) for the request with key, each once, in
// the order they first came.
func (p *Provider) Keys(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.keys[key])
}

// LoseAnswers makes the provider charge the next n calls that it takes,
// then answer each with 502, as a gateway that lost the provider's answer
// would: the caller cannot tell the charge from none.
func (p *Provider) LoseAnswers(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = n
}

// FailNext makes the provider answer the next n calls with 500, without
// charging.
func (p *Provider) FailNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = n
}

// Hold makes the calls that arrive from now on wait before they charge,
// until release is called; entered receives once for each call that
// arrives while the one before it has not been received.
func (p *Provider) Hold() (entered <-chan struct{}, release func()) {
	return p.hold(&p.before)
}

// HoldAnswers makes the calls that arrive from now on charge, then wait
// before they answer, until release is called or their caller gives up:
// an answer that comes too late for its caller. charged receives once for
// each call that charged while the one before it has not been received.
func (p *Provider) HoldAnswers() (charged <-chan struct{}, release func()) {
	return p.hold(&p.after)
}

// hold puts a gate at *at, and returns its reached channel and the
// function that opens it and takes it away.
func (p *Provider) hold(at **gate) (<-chan struct{}, func()) {
	g := &gate{held: make(chan struct{}), reached: make(chan struct{}, 1)}
	p.mu.Lock()
	*at = g
	p.mu.Unlock()
	var once sync.Once
	return g.reached, func() {
		once.Do(func() {
			p.mu.Lock()
			*at = nil
			p.mu.Unlock()
			close(g.held)
		})
	}
}

// Charge calls the provider at url for the request with key, with callKey
// as the idempotency key, and returns the charge's id.
func Charge(ctx context.Context, url, key, callKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Idempotency-Key", callKey)
	req.Header.Set("X-Order", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("provider: %s", resp.Status)
	}
	var body struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.ID, nil
}

// The points between the checkout's steps, at which a test may kill the
// service that runs it.
const (
	BeforeOrderCommit   = "before the commit of order"
	BeforeCall          = "after the commit of order, before the call"
	AfterCall           = "after the call, before the next phase"
	BeforeChargedCommit = "before the commit of charged"
	AfterChargedCommit  = "after the commit of charged"
	BeforeConfirmCommit = "before the commit of confirm"
	AfterConfirmCommit  = "after the commit of confirm"
)

// Points lists the points in the order the checkout passes them.
var Points = []string{BeforeOrderCommit, BeforeCall, AfterCall, BeforeChargedCommit,
	AfterChargedCommit, BeforeConfirmCommit, AfterConfirmCommit}

// CallsAfterKill is how many calls the provider gets for a checkout that
// was killed at point and then resumed: two when the kill fell between the
// call and the commit of the phase that records it, one otherwise.
func CallsAfterKill(point string) int {
	if point == AfterCall || point == BeforeChargedCommit {
		return 2
	}
	return 1
}

// The ways a test runs the checkout: through database/sql, and, on
// PostgreSQL through pgx, on a pgx pool as well.
const (
	ViaSQL     = "database-sql"
	ViaPgxPool = "pgxpool"
)

// Ways lists the ways to run the checkout on tg.
func Ways(tg dbtest.Target) []string {
	if tg.Family == "postgres" && tg.Driver == "pgx" {
		return []string{ViaSQL, ViaPgxPool}
	}
	return []string{ViaSQL}
}

// TxOps sends the statements of the checkout's phases through a driver's
// transaction.
type TxOps[TX any] struct {
	Exec func(ctx context.Context, tx TX, query string, args ...any) error
	Scan func(ctx context.Context, tx TX, query string, args []any, dest ...any) error
}

// SQLOps are the TxOps of database/sql.
var SQLOps = TxOps[*sql.Tx]{
	Exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	},
	Scan: func(ctx context.Context, tx *sql.Tx, q string, args []any, dest ...any) error {
		return tx.QueryRowContext(ctx, q, args...).Scan(dest...)
	},
}

// PgxOps are the TxOps of pgx.
var PgxOps = TxOps[pgx.Tx]{
	Exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	},
	Scan: func(ctx context.Context, tx pgx.Tx, q string, args []any, dest ...any) error {
		return tx.QueryRow(ctx, q, args...).Scan(dest...)
	},
}

// Checkout is one checkout, on a driver whose phases send their
// statements with Ops.
type Checkout[TX any] struct {
	Ops     TxOps[TX]
	Effects *dbtest.Effects
	URL     string // the provider's
	// Key names the checkout at the provider, and in its effect rows
	// unless Stored is set.
	Key string
	// Stored, when set, names the checkout in its effect rows: the key as
	// the Store keeps it, which an adapter makes from Key, so that on
	// Vitess the rows live on the shard of the checkout's record.
	Stored string
	// Die, when set, is called at each of the Points.
	Die func(point string)
	// Answer, when set, makes the final response from the charge's id;
	// by default it is a 201 whose body is the id.
	Answer func(ctx context.Context, chargeID string) (idem.Response, error)
}

// Steps returns the checkout's steps: the order phase, the charge at the
// provider, the charged phase, which stores the charge's id, and the final
// phase, which reads it back for the response. Each phase writes one
// effect row noted with its name.
func (c Checkout[TX]) Steps() []idem.Step {
	die := c.Die
	if die == nil {
		die = func(string) {}
	}
	answer := orDefault(c.Answer)
	rows := c.Key
	if c.Stored != "" {
		rows = c.Stored
	}
	var chargeID string
	insert := func(ctx context.Context, tx TX, note string) error {
		return c.Ops.Exec(ctx, tx, c.Effects.InsertSQL(), dbtest.EffectKey(rows), note)
	}
	return []idem.Step{
		idem.Phase("order", func(ctx context.Context, tx TX) error {
			err := insert(ctx, tx, "order")
			die(BeforeOrderCommit)
			return err
		}),
		idem.Call("charge", func(ctx context.Context, callKey string) (err error) {
			die(BeforeCall)
			chargeID, err = Charge(ctx, c.URL, c.Key, callKey)
			die(AfterCall)
			return err
		}),
		idem.Phase("charged", func(ctx context.Context, tx TX) error {
			err := insert(ctx, tx, "charged "+chargeID)
			die(BeforeChargedCommit)
			return err
		}),
		idem.Final("confirm", func(ctx context.Context, tx TX) (idem.Response, error) {
			die(AfterChargedCommit)
			var note string
			q := "SELECT note FROM " + c.Effects.Table + " WHERE k = " + c.Effects.Placeholder(1) + " AND note LIKE 'charged %'"
			if err := c.Ops.Scan(ctx, tx, q, []any{dbtest.EffectKey(rows)}, &note); err != nil {
				return idem.Response{}, err
			}
			if err := insert(ctx, tx, "confirm"); err != nil {
				return idem.Response{}, err
			}
			resp, err := answer(ctx, strings.TrimPrefix(note, "charged "))
			die(BeforeConfirmCommit)
			return resp, err
		}),
	}
}

// orDefault returns answer, or, when it is nil, the default answer: a 201
// whose body is the charge's id.
func orDefault(answer func(context.Context, string) (idem.Response, error)) func(context.Context, string) (idem.Response, error) {
	if answer != nil {
		return answer
	}
	return func(_ context.Context, id string) (idem.Response, error) {
		return idem.Response{Status: http.StatusCreated, Body: []byte(id)}, nil
	}
}

// Effects checks the effect rows of the checkout key, whose final answer
// carries the charge chargeID: each phase's once, in order.
func Effects(t testing.TB, fx *dbtest.Effects, key, chargeID string) {
	t.Helper()
	notes := fx.Notes(t)[key]
	if len(notes) != 3 || notes[0] != "order" || notes[1] != "charged "+chargeID || notes[2] != "confirm" {
		t.Errorf("%s: effects %q, want each phase once, in order, with the charge %s", key, notes, chargeID)
	}
}

// Together runs n clients at once, each calling client, and returns the
// answers of those that did not fail; a client's error fails the test.
func Together[A any](t testing.TB, n int, client func() (A, error)) []A {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers []A
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := client()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return answers
}
