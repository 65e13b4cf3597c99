package campaign

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a service process that the campaign supervises.
type proc struct {
	index int
	cfg   ServiceConfig
	bin   string
	log   io.Writer
	// serverKilled hears that the service killed the database server.
	serverKilled func(service int, point string)

	mu   sync.Mutex
	cmd  *exec.Cmd
	addr string        // HTTP's
	grpc string        // gRPC's
	done chan struct{} // closed when cmd has ended
}

// start starts the service and waits until it listens.
func (p *proc) start() error {
	cfg, _ := json.Marshal(p.cfg)
	cmd := exec.Command(p.bin)
	cmd.Env = append(os.Environ(), EnvService+"="+string(cfg))
	cmd.Stderr = p.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	// The service ends when this pipe does (Serve): it is never written,
	// and closes when the service ends or this process dies.
	if _, err := cmd.StdinPipe(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				addr <- a
			} else if point, ok := strings.CutPrefix(sc.Text(), serverKilled+" "); ok && p.serverKilled != nil {
				p.serverKilled(p.index, point)
			}
		}
		close(addr)
	}()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			<-done
			return fmt.Errorf("service %d ended before it listened", p.index)
		}
		httpAddr, grpcAddr, _ := strings.Cut(a, " ")
		p.mu.Lock()
		p.cmd, p.addr, p.grpc, p.done = cmd, httpAddr, grpcAddr, done
		p.mu.Unlock()
		return nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return fmt.Errorf("service %d did not listen within 60 s", p.index)
	}
}

// base is the service's address as a URL.
func (p *proc) base() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "http://" + p.addr
}

// grpcAddr is the address of the service's gRPC server.
func (p *proc) grpcAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grpc
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// supervise restarts the service whenever it dies, until ctx ends; then
// it kills it.
func (p *proc) supervise(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGKILL)
			<-done
			return
		case <-done:
		}
		for ctx.Err() == nil {
			if err := p.start(); err == nil {
				break
			} else {
				fmt.Fprintf(p.log, "campaign: restart service %d: %v\n", p.index, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
