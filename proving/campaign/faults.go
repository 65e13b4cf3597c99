package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemgo/idem/proving/fault"
)

// faults causes the plan's faults at their times, until ctx ends.
func (c *campaign) faults(ctx context.Context, start time.Time) {
	for _, f := range c.plan.Faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.At))):
		}
		c.hist.add(Event{Type: EvFault, Fault: &f})
		p := c.procs[f.Service]
		switch f.Kind {
		case FaultKill:
			p.signal(syscall.SIGKILL)
		// A paused service takes its arm once it goes on: the schedule
		// does not wait for it.
		case FaultKillAt:
			c.armLater(ctx, p, Arm{KillAt: f.Point})
		case FaultLoseReply:
			c.armLater(ctx, p, Arm{LoseReply: true})
		case FaultPause:
			p.signal(syscall.SIGSTOP)
			time.AfterFunc(f.For, func() { p.signal(syscall.SIGCONT) })
		case FaultProvider:
			c.prov.strike(f.Point, f.For)
		case FaultCutAll:
			c.proxy.CutAll()
		case FaultCutCommit:
			if f.Point == "before" {
				c.proxy.SetCut(fault.CutBeforeCommit)
			} else {
				c.proxy.SetCut(fault.CutAfterCommit)
			}
		case FaultLatency:
			ms, _ := strconv.Atoi(f.Point)
			c.proxy.SetLatency(time.Duration(ms) * time.Millisecond)
			time.AfterFunc(f.For, func() { c.proxy.SetLatency(0) })
		case FaultClock:
			ms, _ := strconv.Atoi(f.Point)
			c.armLater(ctx, p, Arm{ClockAhead: time.Duration(ms) * time.Millisecond, For: f.For})
		case FaultPool:
			c.armLater(ctx, p, Arm{HoldPools: true, For: f.For})
		case FaultServerKill:
			if f.Point == PointAnywhere {
				c.srv.kill(PointAnywhere, -1)
			} else {
				c.armLater(ctx, p, Arm{KillServer: f.Point})
			}
		}
	}
	<-ctx.Done()
}

// armLater arms a fault in service p without waiting for it; quiet waits
// for every such arm before it takes them back.
func (c *campaign) armLater(ctx context.Context, p *proc, a Arm) {
	c.arming.Add(1)
	go func() {
		defer c.arming.Done()
		c.arm(context.WithoutCancel(ctx), p, a)
	}()
}

// arm arms a fault in service p.
func (c *campaign) arm(ctx context.Context, p *proc, a Arm) {
	body, _ := json.Marshal(a)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base()+"/arm", bytes.NewReader(body))
	if err != nil {
		return
	}
	if resp, err := c.http.Do(req); err == nil {
		resp.Body.Close()
	}
}

// quiet stops every fault: paused services go on, the proxy passes
// everything at once, the provider's outage ends, armed faults are taken
// back, and every service and the database server are up again. It fails
// when the server did not come back from a kill.
func (c *campaign) quiet(ctx context.Context) error {
	if c.proxy != nil {
		c.proxy.SetLatency(0)
		c.proxy.SetCut(fault.CutNothing)
	}
	c.prov.calm()
	for _, p := range c.procs {
		p.signal(syscall.SIGCONT)
	}
	c.arming.Wait()
	time.Sleep(300 * time.Millisecond) // for the supervisors to restart what died last
	for _, p := range c.procs {
		for range 100 {
			if conn, err := net.Dial("tcp", strings.TrimPrefix(p.base(), "http://")); err == nil {
				conn.Close()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.arm(ctx, p, Arm{Disarm: true})
	}
	if c.srv != nil {
		// A kill that a service made just before its disarm is heard
		// a moment later.
		time.Sleep(100 * time.Millisecond)
		if err := c.srv.up(ctx); err != nil {
			return err
		}
	}
	c.hist.add(Event{Type: EvQuiet})
	return nil
}

// serverKilled hears from service that it killed the database server at
// point.
func (c *campaign) serverKilled(service int, point string) {
	if c.srv != nil {
		c.srv.killed(point, service)
	}
}
