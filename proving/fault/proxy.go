// Package fault holds the faults that the proving ground causes between
// idem and its database, for its tests and its fault campaign alike: a TCP
// proxy that cuts a connection at its COMMIT, cuts every connection at
// once or delays them (Proxy), and a database/sql connector that loses a
// commit's reply or lands it late (Lossy).
package fault

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Proxy is a TCP proxy that can cut a connection at its next COMMIT:
// after passing the COMMIT on, so that the server commits but its reply is
// lost, or before, so that nothing commits and the client cannot tell; or it
// cuts the client off and holds the COMMIT back until another connection
// sends an INSERT, so that the commit lands after the client gave up on it.
type Proxy struct {
	ln      net.Listener
	target  string
	mode    atomic.Int32 // a Cut
	latency atomic.Int64 // a time.Duration, before each chunk a client sends
	wg      sync.WaitGroup
	// open holds the connections that are open, both sides, for CutAll.
	mu   sync.Mutex
	open map[net.Conn]struct{}
	// insert is closed at the first claim (an INSERT, or MySQL's CALL)
	// that a connection other than the cut one sends after a
	// CutLateCommit.
	insert    chan struct{}
	insertOne sync.Once
	holding   atomic.Bool
}

// Cut is what a Proxy does at a connection's next COMMIT.
type Cut int32

const (
	// CutNothing passes every statement on.
	CutNothing Cut = iota
	// CutAfterCommit passes the COMMIT on and cuts the client off, so
	// that the server commits and its reply is lost.
	CutAfterCommit
	// CutBeforeCommit cuts the connection before the COMMIT: nothing
	// commits, and the client cannot tell.
	CutBeforeCommit
	// CutLateCommit cuts the client off and holds the COMMIT back until
	// another connection sends a claim, then passes it on: the commit
	// lands after the client gave up on it.
	CutLateCommit
)

// StartProxy starts a Proxy to target (host:port) on a free port of
// 127.0.0.1, cutting nothing; it stops at the end of t.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// NewProxy starts a Proxy to target (host:port) on a free port of
// 127.0.0.1, cutting nothing, for a program to Close.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, insert: make(chan struct{}), open: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Close stops the proxy: it stops listening, cuts every connection and
// waits for their goroutines to end.
func (p *Proxy) Close() {
	p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

// CutAll cuts every connection that is open now, wherever its statements
// stand: the clients see their connections drop, and the server ends
// their sessions, rolling back what they had not committed.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		c.Close()
	}
}

// SetLatency makes the proxy wait d before it passes on each chunk that a
// client sends, from now on; 0 passes them at once.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// track adds c to the open connections, or takes it away.
func (p *Proxy) track(c net.Conn, open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if open {
		p.open[c] = struct{}{}
	} else {
		delete(p.open, c)
	}
}

// Addr is the proxy's address, host:port, for a client's DSN.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetCut makes the proxy do c at the next COMMIT that any connection
// sends, once.
func (p *Proxy) SetCut(c Cut) { p.mode.Store(int32(c)) }

// Pending is the cut that no COMMIT has met yet: CutNothing once one did.
func (p *Proxy) Pending() Cut { return Cut(p.mode.Load()) }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client, true)
		p.track(server, true)
		p.wg.Add(2)
		replied := make(chan struct{})
		go func() { // server to client, as it is
			defer p.wg.Done()
			defer close(replied)
			_, _ = io.Copy(client, server)
			client.Close()
		}()
		go func() { // client to server, watching for COMMIT
			defer p.wg.Done()
			defer p.track(server, false)
			defer p.track(client, false)
			defer server.Close()
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					if d := time.Duration(p.latency.Load()); d > 0 {
						time.Sleep(d)
					}
					chunk := buf[:n]
					if p.holding.Load() && isClaim(chunk) {
						p.insertOne.Do(func() { close(p.insert) })
					}
					mode := p.mode.Load()
					commit := mode != int32(CutNothing) && bytes.Contains(bytes.ToLower(chunk), []byte("commit"))
					if commit && p.mode.CompareAndSwap(mode, int32(CutNothing)) && mode == int32(CutBeforeCommit) {
						return
					}
					if commit {
						p.commitCut(client, server, chunk, replied, mode == int32(CutLateCommit))
						return
					}
					if _, werr := server.Write(chunk); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// isClaim reports whether chunk, sent by a client, holds a claim: an INSERT,
// or the CALL of MySQL's claim procedure.
func isClaim(chunk []byte) bool {
	c := bytes.ToLower(chunk)
	return bytes.Contains(c, []byte("insert")) || bytes.Contains(c, []byte("call "))
}

// commitCut cuts the client off, so that no reply can reach it, then
// passes the COMMIT on and waits for the server to answer it. With late, it
// first waits for another connection's claim (that of the client's next
// attempt, sent after it looked the key up and found nothing). The
// waits are bounded so that a test that goes wrong ends.
func (p *Proxy) commitCut(client, server net.Conn, commit []byte, replied <-chan struct{}, late bool) {
	client.Close()
	if late {
		p.holding.Store(true)
		select {
		case <-p.insert:
		case <-time.After(30 * time.Second):
		}
	}
	if _, err := server.Write(commit); err != nil {
		return
	}
	select {
	case <-replied:
	case <-time.After(30 * time.Second):
	}
}

// DSNThrough returns dsn, a data source of a server of family ("postgres"
// or "mysql"), with the server's address replaced by what proxy returns
// for it.
func DSNThrough(t testing.TB, family, dsn string, proxy func(target string) string) string {
	t.Helper()
	through, err := Through(family, dsn, proxy)
	if err != nil {
		t.Fatal(err)
	}
	return through
}

// Through is DSNThrough for a program: it returns the error that
// DSNThrough fails t with.
func Through(family, dsn string, proxy func(target string) string) (string, error) {
	switch family {
	case "postgres":
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Host = proxy(u.Host)
		return u.String(), nil
	case "mysql":
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return "", err
		}
		cfg.Addr = proxy(cfg.Addr)
		return cfg.FormatDSN(), nil
	}
	return "", fmt.Errorf("fault: no proxy for %s", family)
}
