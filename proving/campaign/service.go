package campaign

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/proving/fault"
)

// ServiceConfig is what a service process is given, in the variable
// EnvService, by the campaign that starts it.
type ServiceConfig struct {
	Index    int    `json:"index"`
	Dialect  string `json:"dialect"` // a dialect's name, as dialects lists it
	Family   string `json:"family"`
	Driver   string `json:"driver"`
	DSN      string `json:"dsn"` // through the proxy, where there is one
	Table    string `json:"table"`
	Provider string `json:"provider"`
	// Server is the control of the database server (EnvServerControl),
	// where the service may kill it.
	Server string `json:"server,omitempty"`
}

// EnvService holds a service's ServiceConfig as JSON: a process of the
// campaign's program that finds it serves instead of running a campaign.
const EnvService = "IDEM_CAMPAIGN_SERVICE"

// The Store's settings in the campaign: short, so that leases run out,
// records expire and Resume takes requests within seconds.
const (
	lease       = 1500 * time.Millisecond
	retention   = 4 * time.Second
	lockTimeout = 500 * time.Millisecond
	resumeAge   = 3 * time.Second
)

var dialects = map[string]idem.Dialect{
	"sqlite": idem.SQLite(), "postgres": idem.Postgres(), "mariadb": idem.MariaDB(),
	"mysql": idem.MySQL(), "tidb": idem.TiDB(), "vitess": idem.Vitess(),
}

// newStore returns the Store of the campaign's table on dialect, with
// more options.
func newStore(dialect, table string, more ...idem.Option) (*idem.Store, error) {
	d, ok := dialects[dialect]
	if !ok {
		return nil, fmt.Errorf("campaign: no dialect %q", dialect)
	}
	return idem.New(d, append([]idem.Option{idem.WithTable(table), idem.WithShardColumn(idem.ShardInt64()),
		idem.WithLease(lease), idem.WithRetention(retention), idem.WithLockTimeout(lockTimeout)}, more...)...)
}

// maxConns is the size of each of a service's connection pools, which a
// FaultPool holds empty.
const maxConns = 16

// service is one service process: it serves the requests of the
// workload on every surface, and the operators' actions, and dies where a
// fault tells it to.
type service struct {
	cfg   ServiceConfig
	db    *sql.DB
	store *idem.Store
	mw    *idemhttp.Middleware
	lossy *fault.Lossy
	// pool and pgxStore serve pgx's own surfaces, where the target's
	// driver is pgx.
	pool     *pgxpool.Pool
	pgxStore *idempgx.Store

	// clockAhead moves the Store's clock (FaultClock), in nanoseconds.
	clockAhead atomic.Int64

	mu         sync.Mutex
	killAt     string             // the point at which the service dies, if any
	serverAt   string             // the point at which it kills the database server, if any
	clockMoves int                // counts the clock's moves
	stopPools  context.CancelFunc // ends the pools' hold under way
}

// Serve runs the service that cfg describes until ctx ends or a fault
// kills it. It prints the line "listening ADDR GRPC-ADDR" once it serves,
// HTTP at the first address and gRPC at the second.
//
// It also ends when its standard input does: the campaign that started
// it holds the other end of the pipe, so that a campaign that dies, even by
// SIGKILL, leaves no service behind.
func Serve(ctx context.Context, cfg ServiceConfig) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	quietDriver()
	s := &service{cfg: cfg, lossy: &fault.Lossy{}}
	s.lossy.Before = s.before
	db, err := sql.Open(cfg.Driver, cfg.DSN)
	if err != nil {
		return err
	}
	base := db.Driver()
	db.Close()
	s.db = sql.OpenDB(s.lossy.Connector(base, cfg.DSN))
	s.db.SetMaxOpenConns(maxConns)
	defer s.db.Close()
	clock := func() time.Time { return time.Now().Add(time.Duration(s.clockAhead.Load())) }
	if s.store, err = newStore(cfg.Dialect, cfg.Table, idem.WithClock(clock)); err != nil {
		return err
	}
	if cfg.Driver == "pgx" {
		pc, err := pgxpool.ParseConfig(cfg.DSN)
		if err != nil {
			return err
		}
		pc.MaxConns = maxConns
		if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return err
		}
		defer s.pool.Close()
		s.pgxStore = idempgx.New(s.store)
	}
	s.mw, err = idemhttp.New(s.store, s.db, nil,
		idemhttp.WithScope(func(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil }),
		idemhttp.WithReplayHeaders(append(idemhttp.DefaultReplayHeaders(), "X-Campaign-Inc")...))
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("POST /pay", withShard(s.mw.Handler(http.HandlerFunc(s.servePay))))
	mux.Handle("POST /checkout", withShard(marked(PointPhaseCommit, s.mw.Steps(func(r *http.Request) ([]idem.Step, error) {
		return checkout(s, sqlExec, r.Header.Get("X-Op"), nil), nil
	}))))
	mux.HandleFunc("POST /direct", s.serveDirect)
	mux.HandleFunc("POST /operate", s.serveOperate)
	mux.HandleFunc("POST /arm", s.serveArm)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	grpcAddr, err := s.serveGRPC(ctx)
	if err != nil {
		return err
	}
	fmt.Println("listening", ln.Addr(), grpcAddr)
	go s.resumeLoop(ctx)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r.WithContext(tracked(r.Context())))
	})}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// quietDriver keeps the MySQL driver from logging each connection that a
// fault cut or a server kill closed: the campaign records what the
// clients saw instead.
func quietDriver() { _ = mysql.SetLogger(log.New(io.Discard, "", 0)) }

// httpRequest is op as an HTTP request to the service at base.
func httpRequest(base string, op Op) *http.Request {
	body := fmt.Sprintf(`{"request":%d}`, op.Request)
	r, _ := http.NewRequest(http.MethodPost, base+"/"+KindOfKey(op.Key), bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", op.Key)
	r.Header.Set("X-Client", op.Scope)
	r.Header.Set("X-Shard", strconv.FormatInt(op.Shard, 10))
	r.Header.Set("X-Op", op.ID())
	return r
}

// ID names op in effects, responses and the history.
func (op Op) ID() string {
	switch op.Client {
	case operatorClient:
		return fmt.Sprintf("operator.%d", op.Seq)
	case drainClient:
		return fmt.Sprintf("drain.%d", op.Seq)
	}
	if op.Twin {
		return fmt.Sprintf("%d.%d.twin", op.Client, op.Seq)
	}
	return fmt.Sprintf("%d.%d", op.Client, op.Seq)
}

// withShard puts the request's shard value, from X-Shard, in its context.
func withShard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shard, err := strconv.ParseInt(r.Header.Get("X-Shard"), 10, 64)
		if err != nil {
			http.Error(w, "bad X-Shard", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.WithShard(r.Context(), shard)))
	})
}

// servePay is the payment: its effect, and its response, in the
// middleware's transaction.
func (s *service) servePay(w http.ResponseWriter, r *http.Request) {
	resp, err := pay(r.Context(), s, sqlExec, idemhttp.Tx(r.Context()), r.Header.Get("X-Op"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// resumeLoop resumes the checkouts that their clients left, as a service
// does on a schedule.
func (s *service) resumeLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.resume(ctx)
		}
	}
}

// resume resumes the checkouts that their clients left once.
func (s *service) resume(ctx context.Context) {
	steps := func(_ context.Context, key string) ([]idem.Step, error) {
		if grpcKey(key) {
			return checkout(s, sqlExec, "resume", grpcFinal), nil
		}
		return checkout(s, sqlExec, "resume", nil), nil
	}
	_, _ = s.store.Resume(tracked(mark(ctx, PointResume)), s.db, nil, steps, idem.ResumeOlderThan(resumeAge))
}

// Answer is what a request or an action was answered, as the client saw
// it.
type Answer struct {
	Outcome string      `json:"outcome"` // claimed, replay, mismatch, inflight, error, lost; ok for an action
	Inc     int64       `json:"inc,omitempty"`
	Status  int         `json:"status,omitempty"`
	Header  http.Header `json:"header,omitempty"`
	Body    []byte      `json:"body,omitempty"`
	Err     string      `json:"err,omitempty"`
	Retry   bool        `json:"retry,omitempty"`   // the error matches idem.ErrRetry
	Refused string      `json:"refused,omitempty"` // an action's refusal: the sentinel's name
}

// serveDirect runs an operation on Do, DoTx or Run in this process.
func (s *service) serveDirect(w http.ResponseWriter, r *http.Request) {
	var op Op
	if err := json.NewDecoder(r.Body).Decode(&op); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := op.StoredKey()
	_, hash, err := s.mw.Identify(httpRequest("http://x", op))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx := idem.WithShard(idem.WithScope(r.Context(), op.Scope), op.Shard)
	var res idem.Result
	switch op.Surface {
	case SurfaceDo:
		res, err = s.do(ctx, key, hash, op)
	case SurfaceDoTx:
		res, err = s.store.DoTx(ctx, s.db, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
			return pay(ctx, s, sqlExec, tx, op.ID())
		})
	case SurfacePgxDoTx:
		res, err = s.pgxStore.DoTx(ctx, s.pool, pgx.TxOptions{}, key, hash, func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
			return pay(ctx, s, pgxExec, tx, op.ID())
		})
	case SurfacePgxRun:
		res, err = s.pgxStore.Run(ctx, s.pool, pgx.TxOptions{}, key, hash, checkout(s, pgxExec, op.ID(), nil)...)
	case SurfaceRun:
		res, err = s.store.Run(mark(ctx, PointPhaseCommit), s.db, nil, key, hash, checkout(s, sqlExec, op.ID(), nil)...)
	default:
		err = fmt.Errorf("campaign: no direct surface %q", op.Surface)
	}
	_ = json.NewEncoder(w).Encode(answerOf(res, err))
}

// do runs op through Do in a transaction of the service's own, which it
// commits on Claimed and rolls back otherwise.
func (s *service) do(ctx context.Context, key string, hash []byte, op Op) (idem.Result, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return idem.Result{}, err
	}
	res, err := s.store.Do(ctx, tx, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		return pay(ctx, s, sqlExec, tx, op.ID())
	})
	if err != nil || res.Outcome != idem.Claimed {
		_ = tx.Rollback()
		return res, err
	}
	return res, tx.Commit()
}

// answerOf is the Answer of a call that returned res and err.
func answerOf(res idem.Result, err error) Answer {
	if err != nil {
		return Answer{Outcome: "error", Err: err.Error(), Retry: errors.Is(err, idem.ErrRetry)}
	}
	a := Answer{Inc: res.Incarnation}
	switch res.Outcome {
	case idem.Claimed:
		a.Outcome = "claimed"
	case idem.Replay:
		a.Outcome = "replay"
	case idem.Mismatch:
		a.Outcome = "mismatch"
		return a
	case idem.InFlight:
		a.Outcome = "inflight"
		return a
	}
	a.Status, a.Header, a.Body = res.Response.Status, res.Response.Header, res.Response.Body
	return a
}

// serveOperate takes an operator's action.
func (s *service) serveOperate(w http.ResponseWriter, r *http.Request) {
	var op Op
	if err := json.NewDecoder(r.Body).Decode(&op); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := op.StoredKey()
	ctx := idem.WithShard(r.Context(), op.RecordShard())
	var err error
	a := Answer{Outcome: "ok"}
	switch op.Action {
	case ActSettle:
		// The response the request would have sent: a gRPC call's is
		// its encoded reply.
		body, _ := json.Marshal(Body{Key: []byte(key), Shard: op.RecordShard(), Op: op.ID(), Settled: true})
		resp := idem.Response{Status: http.StatusOK, Body: body}
		if grpcKey(key) {
			reply, _ := proto.Marshal(reply(resp))
			resp = idem.Response{Status: int(codes.OK), Body: reply}
		}
		a.Status, a.Body = resp.Status, resp.Body
		err = s.store.Settle(ctx, s.db, key, resp)
	case ActRelease:
		err = s.store.ReleaseWithoutEffect(ctx, s.db, key)
	case ActReleaseUndone:
		err = s.store.ReleaseUndone(ctx, s.db, key)
	case ActForget:
		err = s.store.Forget(ctx, s.db, key)
	case ActPurge:
		var n int64
		n, err = s.store.Purge(mark(ctx, PointPurge), s.db, 100)
		a.Status = int(n)
	default:
		err = fmt.Errorf("campaign: no action %q", op.Action)
	}
	if err != nil {
		a = Answer{Outcome: "error", Err: err.Error(), Refused: refusal(err)}
	}
	_ = json.NewEncoder(w).Encode(a)
}

// refusal names the sentinel that err matches, where it is one by which
// an operator's action refuses.
func refusal(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{
		{"not-found", idem.ErrNotFound}, {"finished", idem.ErrKeyFinished}, {"held", idem.ErrKeyHeld},
		{"unfinished", idem.ErrKeyUnfinished}, {"phases-committed", idem.ErrPhasesCommitted},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return ""
}
