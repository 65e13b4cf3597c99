package campaign

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvServerControl names the directory in which scripts/servers.bash,
// asked for durable servers (IDEM_DURABLE=1, as scripts/campaign does),
// keeps a control per server: a directory postgres, mariadb or mysql
// holding `pid`, a link to the server's pid file, and `restart`, a script
// that starts the server again as it was started and returns once it
// answers. Without it the campaign kills no server: the test suite's
// servers are shared by every package's tests.
const EnvServerControl = "IDEM_SERVER_CONTROL"

// controlOf returns the control directory of the server behind the
// proving ground's target called name, "" where it has none: TiDB's
// data lives in a directory that a killed server does not find again,
// and Vitess's vttestserver takes minutes to start.
func controlOf(name string) string {
	root := os.Getenv(EnvServerControl)
	server := ""
	switch name {
	case "postgres/pq", "postgres/pgx":
		server = "postgres"
	case "mariadb", "mariadb/MySQL":
		server = "mariadb"
	case "mysql":
		server = "mysql"
	}
	if root == "" || server == "" {
		return ""
	}
	dir := filepath.Join(root, server)
	if _, err := os.Stat(filepath.Join(dir, "restart")); err != nil {
		return ""
	}
	return dir
}

// killServer SIGKILLs the server whose control is dir, with every process
// it started (PostgreSQL's backends), and reports whether it was running;
// with wait, it returns once every one of them is dead.
// A process is the server only if its command line names the directory of
// the run that started it: a pid file that a killed server left may name
// a process that has nothing to do with it.
func killServer(dir string, wait bool) bool {
	pid, ok := serverPID(dir)
	if !ok {
		return false
	}
	run := filepath.Dir(filepath.Dir(dir)) // the run's directory, which holds the control
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(run)) {
		return false
	}
	// A server with children (PostgreSQL's postmaster) is stopped
	// first, so that it starts no process while they are found: a
	// backend that it forked meanwhile would outlive it holding its
	// shared memory, in which no new postmaster starts. One without (a
	// mysqld) is not, as the runuser above it would stop as well, and
	// then never reap it.
	children := childrenOf(pid)
	if len(children) > 0 {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return false
		}
		children = childrenOf(pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return false
	}
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(5 * time.Second); wait && time.Now().Before(deadline); {
		if slices.IndexFunc(append(children, pid), alive) < 0 {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// serverPID reads the pid file of the server whose control is dir: the
// server's pid when it runs, or the last one's when a kill left it.
func serverPID(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(first)))
	return pid, err == nil
}

// alive reports whether process pid runs: it exists and is no zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z")
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			kids = append(kids, p)
		}
	}
	return kids
}

// dbServer is the campaign's database server, which faults kill and the
// campaign starts again.
type dbServer struct {
	dir    string
	record func(Event)

	mu         sync.Mutex
	restarting chan struct{} // closed when the restart under way ends; nil when up
	again      bool          // a kill struck the server that the restart under way started
	err        error         // the first restart that failed
}

// kill kills the server now, unless it is down already, and starts it
// again.
func (s *dbServer) kill(point string, service int) {
	s.mu.Lock()
	down := s.restarting != nil
	s.mu.Unlock()
	if down {
		return
	}
	if killServer(s.dir, false) {
		s.killed(point, service)
	}
}

// killed records a kill, by the campaign or by a service at point, and
// starts the server again. A service may kill the server that a restart
// under way has just started: that restart then starts it once more.
func (s *dbServer) killed(point string, service int) {
	s.record(Event{Type: EvServer, Server: &ServerEvent{Killed: true, Point: point, Service: service}})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restarting != nil {
		s.again = true
		return
	}
	done := make(chan struct{})
	s.restarting = done
	go func() {
		for {
			start := time.Now()
			err := s.restart()
			s.record(Event{Type: EvServer, Server: &ServerEvent{Up: err == nil, Took: time.Since(start), Err: errText(err)}})
			s.mu.Lock()
			if again := s.again && err == nil; again {
				s.again = false
				s.mu.Unlock()
				continue
			}
			s.restarting, s.again = nil, false
			if err != nil && s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
			close(done)
			return
		}
	}()
}

// restart waits until the killed server's process is gone, then runs
// its restart script. Gone means reaped: PostgreSQL refuses to start while
// the pid in its lock file names a process, a zombie too, and whoever
// adopted the killed postmaster may take a second to reap it.
func (s *dbServer) restart() error {
	if pid, ok := serverPID(s.dir); ok {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var err error
	for range 5 {
		var out []byte
		if out, err = exec.Command(filepath.Join(s.dir, "restart")).CombinedOutput(); err == nil {
			return nil
		}
		err = fmt.Errorf("campaign: restart the server: %v: %s", err, out)
		time.Sleep(time.Second)
	}
	return err
}

// up waits until the server is up, and returns the error of the first
// restart that failed, if one did.
func (s *dbServer) up(ctx context.Context) error {
	s.mu.Lock()
	done := s.restarting
	s.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
