package campaign

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/proving/fault"
)

// Arm is a fault that a service causes in itself.
type Arm struct {
	KillAt    string `json:"kill_at,omitempty"`
	LoseReply bool   `json:"lose_reply,omitempty"`
	// KillServer is the point at which the service kills the database
	// server: its next commit of a final effect, or of a multi-step
	// request's phase, or the next Purge or Resume, which it starts at
	// once.
	KillServer string `json:"kill_server,omitempty"`
	// ClockAhead moves the Store's clock for For; HoldPools holds the
	// service's connection pools empty for For.
	ClockAhead time.Duration `json:"clock_ahead,omitempty"`
	HoldPools  bool          `json:"hold_pools,omitempty"`
	For        time.Duration `json:"for,omitempty"`
	// Disarm takes back every fault armed before: the faults have
	// stopped.
	Disarm bool `json:"disarm,omitempty"`
}

// serveArm arms a fault in this service.
func (s *service) serveArm(w http.ResponseWriter, r *http.Request) {
	var a Arm
	if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case a.Disarm:
		s.killAt, s.serverAt = "", ""
		s.lossy.SetCommit(fault.CommitNormally)
		s.clockAhead.Store(0)
		s.clockMoves++
		if s.stopPools != nil {
			s.stopPools()
		}
	case a.KillAt == PointCheckpoint:
		go s.killInCheckpoint()
	case a.KillAt != "":
		s.killAt = a.KillAt
	case a.LoseReply:
		s.lossy.SetCommit(fault.LoseReply)
	case a.KillServer != "":
		s.serverAt = a.KillServer
		ctx := context.WithoutCancel(r.Context())
		switch a.KillServer {
		case PointPurge:
			go func() { _, _ = s.store.Purge(mark(ctx, PointPurge), s.db, 100) }()
		case PointResume:
			go s.resume(ctx)
		}
	case a.HoldPools:
		ctx, stop := context.WithTimeout(context.Background(), a.For)
		if s.stopPools != nil {
			s.stopPools()
		}
		s.stopPools = stop
		go holdPools(ctx, s.db, s.pool)
	case a.ClockAhead != 0:
		// The clock goes back to time for this move alone, not for one
		// that came after it.
		s.clockMoves++
		move := s.clockMoves
		s.clockAhead.Store(int64(a.ClockAhead))
		time.AfterFunc(a.For, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.clockMoves == move {
				s.clockAhead.Store(0)
			}
		})
	}
}

// pass is called at each point a request passes: the service dies there
// when a fault armed it.
func (s *service) pass(point string) {
	s.mu.Lock()
	die := s.killAt == point
	s.mu.Unlock()
	if die {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // until the signal lands
	}
}

// before is called before each statement that the service's database/sql
// connections send, and each COMMIT: a COMMIT passes PointCommit, and
// kills the database server where a fault armed the kind of commit it
// is; so does the first statement under a context that mark marked with
// the point armed.
func (s *service) before(ctx context.Context, statement string) {
	commit := statement == "COMMIT"
	if commit {
		s.pass(PointCommit)
	}
	m, _ := ctx.Value(markKey{}).(string)
	s.mu.Lock()
	at := s.serverAt
	var strike bool
	switch at {
	case "":
	case PointFinalCommit, PointFinalCommitRace:
		strike = commit && finalWritten(ctx)
	case PointPhaseCommit:
		strike = commit && m == at
	default:
		strike = m == at
	}
	if strike {
		s.serverAt = ""
	}
	s.mu.Unlock()
	if !strike {
		return
	}
	kill := func(wait bool) {
		if killServer(s.cfg.Server, wait) {
			fmt.Println(serverKilled, at)
		}
	}
	if at == PointFinalCommit {
		kill(true) // the COMMIT goes out to a dead server
		return
	}
	// A racing COMMIT meets the kill on its way or as the server makes
	// it durable, which takes well under a millisecond here; the
	// statements of Purge and Resume go on, and the kill lands while
	// they or those after them run.
	jitter := time.Duration(rand.IntN(3000)) * time.Microsecond
	if commit {
		jitter = time.Duration(rand.IntN(300)) * time.Microsecond
	}
	go func() {
		time.Sleep(jitter)
		kill(false)
	}()
}

// serverKilled starts the line by which a service tells the campaign
// that it killed the database server, and at which point.
const serverKilled = "server-killed"

// finalKey is the key of the flag that a request's context carries, set
// once the request's final effect is written (tracked).
type finalKey struct{}

// tracked gives ctx a flag of its own, which effect sets when it writes a
// final effect under it: the commit whose context holds it set carries
// that effect.
func tracked(ctx context.Context) context.Context {
	return context.WithValue(ctx, finalKey{}, new(atomic.Bool))
}

func wroteFinal(ctx context.Context) {
	if f, ok := ctx.Value(finalKey{}).(*atomic.Bool); ok {
		f.Store(true)
	}
}

func finalWritten(ctx context.Context) bool {
	f, ok := ctx.Value(finalKey{}).(*atomic.Bool)
	return ok && f.Load()
}

// markKey is the key of a context's mark: the point at which a kill of
// the database server armed for that point strikes the statements sent
// under it.
type markKey struct{}

func mark(ctx context.Context, point string) context.Context {
	return context.WithValue(ctx, markKey{}, point)
}

// marked marks the context of each request that next serves.
func marked(point string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(mark(r.Context(), point)))
	})
}

// holdPools takes every connection of db's pool, and of pool's where there
// is one, as they come free, and holds them until ctx ends: the requests
// meanwhile wait for a connection, and a multi-step request's lease may run
// out while it waits.
func holdPools(ctx context.Context, db *sql.DB, pool *pgxpool.Pool) {
	var conns []*sql.Conn
	for range maxConns {
		c, err := db.Conn(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	var pgxConns []*pgxpool.Conn
	for range maxConns {
		if pool == nil {
			break
		}
		c, err := pool.Acquire(ctx)
		if err != nil {
			break
		}
		pgxConns = append(pgxConns, c)
	}
	<-ctx.Done()
	for _, c := range conns {
		_ = c.Close()
	}
	for _, c := range pgxConns {
		c.Release()
	}
}

// killInCheckpoint kills the service while a checkpoint of SQLite's
// write-ahead log runs: it starts a passive checkpoint, which waits for no
// reader or writer, and dies a moment later if the checkpoint still runs;
// otherwise it tries again, up to twenty times, and lives on.
func (s *service) killInCheckpoint() {
	for range 20 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = s.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		}()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		select {
		case <-done:
			continue
		default:
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
