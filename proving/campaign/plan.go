package campaign

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/idemgo/idem/idemhttp"
)

// The surfaces through which a client's request reaches the Store.
const (
	SurfaceDo    = "do"    // Store.Do, in a transaction the service begins
	SurfaceDoTx  = "dotx"  // Store.DoTx
	SurfaceRun   = "run"   // Store.Run, the multi-step checkout
	SurfaceHTTP  = "http"  // idemhttp's Handler, through idemclient
	SurfaceSteps = "steps" // idemhttp's Steps, the checkout, through idemclient
	SurfaceGRPC  = "grpc"  // idemgrpc's interceptor, either kind, through its client interceptor
	// On PostgreSQL through pgx, pgx's own interface as well.
	SurfacePgxDoTx = "pgx-dotx" // idempgx's DoTx, on a pgx pool
	SurfacePgxRun  = "pgx-run"  // idempgx's Run, on a pgx pool
)

// surfaces lists the surfaces in the order the plan draws from: pgx's own
// where the services reach the database through pgx.
func surfaces(pgx bool) []string {
	s := []string{SurfaceDo, SurfaceDoTx, SurfaceRun, SurfaceHTTP, SurfaceSteps, SurfaceGRPC}
	if pgx {
		s = append(s, SurfacePgxDoTx, SurfacePgxRun)
	}
	return s
}

// The operators' actions, as docs/operations.md describes them.
const (
	ActSettle        = "settle"
	ActRelease       = "release"        // ReleaseWithoutEffect
	ActReleaseUndone = "release-undone" // ReleaseUndone, its phases' effects undone
	ActForget        = "forget"
	ActPurge         = "purge"
)

// Actions lists the operators' actions in the order the plan draws from.
var Actions = []string{ActSettle, ActRelease, ActReleaseUndone, ActForget, ActPurge}

// Op is one request a client sends, or one action an operator takes,
// drawn from the seed alone: nothing in it depends on an earlier answer,
// so that one seed makes the same operations on every run.
type Op struct {
	Client  int    `json:"client"` // the client; operatorClient and drainClient for the others
	Seq     int    `json:"seq"`    // its place in that client's sequence
	Via     int    `json:"via"`    // which service it is sent to
	Surface string `json:"surface,omitempty"`
	Action  string `json:"action,omitempty"`
	// Key is the client's idempotency key, Scope the client it is scoped
	// to, Shard the record's shard value: one key under two scopes, or
	// two shard values, names two records.
	Key   string `json:"key"`
	Scope string `json:"scope"`
	Shard int64  `json:"shard"`
	// Request tells the requests under one key apart: 0 is the key's
	// first request, and a retry sends it again; 1 reuses the key for
	// another request, which must be refused.
	Request int `json:"request"`
	// Burst sends the request twice at once, the second time (Twin) to
	// the next service.
	Burst bool `json:"burst,omitempty"`
	Twin  bool `json:"twin,omitempty"`
	// Stuck makes an operator act, as operations.md has them do, on a
	// request that Store.Unfinished lists: the Pick-th, counted round.
	// Stored is the stored key of the one it listed when the action was
	// sent, which the plan cannot know.
	Stuck       bool   `json:"stuck,omitempty"`
	Pick        int    `json:"pick,omitempty"`
	Stored      []byte `json:"stored,omitempty"`
	StoredShard int64  `json:"stored_shard,omitempty"`
}

// StoredKey is the key under which the Store keeps op's record.
func (op Op) StoredKey() string {
	if op.Stored != nil {
		return string(op.Stored)
	}
	return idemhttp.StoredKey(op.Scope, op.Key)
}

// RecordShard is the shard value of op's record.
func (op Op) RecordShard() int64 {
	if op.Stored != nil {
		return op.StoredShard
	}
	return op.Shard
}

// Fault is one fault of the schedule, At after the campaign's start.
type Fault struct {
	At      time.Duration `json:"at"`
	Kind    string        `json:"kind"`
	Service int           `json:"service"`
	// Point is where a kill strikes (KillAt), or what a cut does.
	Point string        `json:"point,omitempty"`
	For   time.Duration `json:"for,omitempty"` // a pause's, a latency's or a provider's outage's length
}

// The kinds of fault.
const (
	FaultKill      = "kill"       // SIGKILL of a service process, wherever it stands
	FaultKillAt    = "kill-at"    // SIGKILL of a service at its next pass of Point
	FaultPause     = "pause"      // SIGSTOP past the lease, then SIGCONT
	FaultCutAll    = "cut"        // every connection to the database cut
	FaultCutCommit = "cut-commit" // the next COMMIT cut, before or after it reaches the server
	FaultLoseReply = "lose-reply" // the next commit's reply lost in the service's driver
	FaultLatency   = "latency"    // latency between the services and the database
	FaultProvider  = "provider"   // the provider's calls fail, or charge and lose their answers, for a while
	FaultClock     = "clock"      // a service's Store clock moved ahead or back, for a while
	FaultPool      = "pool"       // a service's connection pools held empty, for a while
	// The database server SIGKILLed, anywhere, or by a service as a
	// request's final effect commits, or a multi-step request's phase
	// commits, or while Purge or Resume runs (Point), and started again,
	// on a server that the campaign can kill (EnvServerControl).
	FaultServerKill = "server-kill"
)

// The points at which a FaultKillAt strikes.
const (
	PointInFunc  = "in-func" // in a Func or a Final, its effect written, before it returns
	PointInCall  = "in-call" // in a Call, after the provider charged
	PointBetween = "between" // between two phases of a multi-step request
	PointCommit  = "commit"  // as a COMMIT is about to be sent
	// On SQLite, while a checkpoint copies the write-ahead log into the
	// database file.
	PointCheckpoint = "checkpoint"
)

var killPoints = []string{PointInFunc, PointInCall, PointBetween, PointCommit}

// The points at which a service kills the database server; the campaign
// kills it anywhere.
const (
	PointAnywhere = "anywhere"
	// Before a commit that carries a request's final effect goes out,
	// the commit whose success the client is told: it meets a dead
	// server. As it goes out, racing it to the disk (FinalCommitRace).
	PointFinalCommit     = "final-commit"
	PointFinalCommitRace = "final-commit-race"
	PointPhaseCommit     = "phase-commit" // as a multi-step request's phase commits
	PointPurge           = "purge"        // while Purge runs
	PointResume          = "resume"       // while Resume runs
)

var serverKillPoints = []string{PointAnywhere, PointFinalCommit, PointFinalCommitRace, PointPhaseCommit, PointPurge, PointResume}

// Plan is what a seed fixes: each client's requests, the operator's
// actions and the fault schedule. The servers' timing is not fixed, so
// how far each client gets in a run, and what each request is answered,
// varies from run to run.
type Plan struct {
	Seed     uint64
	Clients  int
	Services int
	Faults   []Fault
	Surfaces []string
}

// The workload's shape: few keys, so that clients meet on them.
const (
	keysInPool = 16
	scopes     = 2
	shards     = 2
)

// NewPlan draws the fault schedule of a campaign of length d on tg from
// seed: network faults where tg is a server, pgx's surfaces where the
// services reach it through pgx, server kills where the campaign can
// kill it, and kills during a checkpoint on SQLite. Where only is set,
// each fault is one of its faults instead, whose kind and point it keeps.
func NewPlan(seed uint64, clients, services int, d time.Duration, tg Target, only []Fault) Plan {
	p := Plan{Seed: seed, Clients: clients, Services: services, Surfaces: surfaces(tg.Driver == "pgx")}
	r := rand.New(rand.NewPCG(seed, 1<<32))
	kinds := []string{FaultKill, FaultKillAt, FaultPause, FaultLoseReply, FaultProvider, FaultClock, FaultPool}
	points := killPoints
	if tg.DSN == "" {
		points = append(points[:len(points):len(points)], PointCheckpoint)
	} else {
		kinds = append(kinds, FaultCutAll, FaultCutCommit, FaultLatency)
	}
	// Where the campaign can kill the server, every third fault is a
	// server kill: what a crash loses is its main question there, and a
	// short campaign must not go without.
	killEvery := 0
	if tg.Control != "" {
		killEvery = 3
	}
	// A fault every 1.5 s on average, none in the first second, so that
	// every service is up and serving when the first one strikes.
	for at := time.Second; ; {
		at += time.Duration(500+r.IntN(2000)) * time.Millisecond
		if at >= d {
			break
		}
		f := Fault{At: at, Kind: kinds[r.IntN(len(kinds))], Service: r.IntN(services)}
		if killEvery > 0 && len(p.Faults)%killEvery == killEvery-1 {
			f.Kind = FaultServerKill
		}
		var o *Fault
		if len(only) > 0 {
			o = &only[r.IntN(len(only))]
			f.Kind = o.Kind
		}
		switch f.Kind {
		case FaultKillAt:
			f.Point = points[r.IntN(len(points))]
		case FaultServerKill:
			f.Point = serverKillPoints[r.IntN(len(serverKillPoints))]
		case FaultClock:
			// Ahead or back by up to twice the lease: leases must not
			// run on this clock.
			ms := 200 + r.IntN(int(2*lease/time.Millisecond))
			if r.IntN(2) == 0 {
				ms = -ms
			}
			f.Point = fmt.Sprint(ms)
			f.For = time.Duration(1000+r.IntN(2000)) * time.Millisecond
		case FaultPool:
			f.For = time.Duration(500+r.IntN(2000)) * time.Millisecond
		case FaultCutCommit:
			f.Point = []string{"before", "after"}[r.IntN(2)]
		case FaultPause:
			f.For = time.Duration(2500+r.IntN(1500)) * time.Millisecond
		case FaultProvider:
			f.Point = []string{"fail", "lose"}[r.IntN(2)]
			f.For = time.Duration(500+r.IntN(1000)) * time.Millisecond
		case FaultLatency:
			f.For = time.Duration(1000+r.IntN(2000)) * time.Millisecond
			f.Point = fmt.Sprint(20 + r.IntN(80)) // milliseconds
		}
		if o != nil && o.Point != "" {
			f.Point = o.Point
		}
		p.Faults = append(p.Faults, f)
	}
	return p
}

// ClientOp returns the seq-th operation of client c: its own stream of
// the seed, so that it is the same however far the other clients got.
func (p Plan) ClientOp(c, seq int) Op {
	r := rand.New(rand.NewPCG(p.Seed, uint64(c)<<32|uint64(seq)))
	op := Op{
		Client:  c,
		Seq:     seq,
		Via:     r.IntN(p.Services),
		Surface: p.Surfaces[r.IntN(len(p.Surfaces))],
		Scope:   fmt.Sprintf("client-%c", 'a'+r.IntN(scopes)),
		Shard:   int64(1 + r.IntN(shards)),
	}
	kind := kindOf(op.Surface)
	if op.Surface == SurfaceGRPC {
		// gRPC's calls have keys of their own: idemgrpc hashes a call
		// otherwise than idemhttp a request, and stores its reply
		// otherwise, so that the two surfaces never share a record.
		kind = []string{KindPay, KindCheckout}[r.IntN(2)]
	}
	op.Key = keyOf(kind, r.IntN(keysInPool))
	if op.Surface == SurfaceGRPC {
		op.Key = grpcPrefix + op.Key
	}
	// One request in eight reuses its key for another request.
	if r.IntN(8) == 0 {
		op.Request = 1
	}
	// One in five goes out twice at once, to two services, as a retry
	// that a client's timeout fires while the first attempt still runs.
	op.Burst = r.IntN(5) == 0
	return op
}

// operatorClient is the operator's client number in an Op.
const operatorClient = -1

// OperatorOp returns the operator's seq-th action.
func (p Plan) OperatorOp(seq int) Op {
	r := rand.New(rand.NewPCG(p.Seed, 1<<40|uint64(seq)))
	op := Op{
		Client: operatorClient,
		Seq:    seq,
		Via:    r.IntN(p.Services),
		Action: Actions[r.IntN(len(Actions))],
		Key:    keyOf([]string{KindPay, KindCheckout}[r.IntN(2)], r.IntN(keysInPool)),
		Scope:  fmt.Sprintf("client-%c", 'a'+r.IntN(scopes)),
		Shard:  int64(1 + r.IntN(shards)),
		Pick:   r.IntN(1 << 20),
	}
	op.Stuck = op.Action != ActPurge && r.IntN(3) != 0
	return op
}

// The two kinds of request: a payment, made in one transaction, and a
// checkout, made of several steps. Their keys never meet: a key names
// one kind.
const (
	KindPay      = "pay"
	KindCheckout = "checkout"
)

// kindOf returns the kind of request that surface sends.
func kindOf(surface string) string {
	if surface == SurfaceRun || surface == SurfaceSteps || surface == SurfacePgxRun {
		return KindCheckout
	}
	return KindPay
}

// keyOf returns the n-th key of kind.
func keyOf(kind string, n int) string { return fmt.Sprintf("%s-%02d", kind, n) }

// grpcPrefix starts the keys of gRPC's calls.
const grpcPrefix = "grpc-"

// KindOfKey returns the kind of request that key names.
func KindOfKey(key string) string {
	if strings.HasPrefix(strings.TrimPrefix(key, grpcPrefix), KindCheckout) {
		return KindCheckout
	}
	return KindPay
}
