package main

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// measurePurge purges purgeRows expired keys in batches while paced clients
// claim new keys, and compares their claim latency with a run without purge.
func measurePurge(ctx context.Context, c config, d database) error {
	const (
		claimers = 4
		pace     = 20 * time.Millisecond // per claimer: 200 claims/s in all
	)
	var batches batchTimes
	b, err := open(ctx, d, c.clients, openOpts{wrap: func(base driver.Driver, dsn string) driver.Connector {
		return &timingConnector{base: base, dsn: dsn, t: &batches}
	}})
	if err != nil {
		return err
	}
	defer b.close()
	// A dialect that purges in one statement times it; one that reads a
	// batch's keys first times the delete, whose list of keys grows with
	// the batch: up to the list, its text is the same.
	batches.prefix = b.queries["Purge"].SQL
	if q, ok := b.queries["PurgeDelete"]; ok {
		before, _, _ := strings.Cut(q.SQL, "IN (")
		batches.prefix = before + "IN ("
	}
	start := time.Now()
	if err := d.load(ctx, b.db, b.table, c.purgeRows, true); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	load := time.Since(start)

	// claims runs paced claimers until stop, and returns the latencies of
	// their claims and of their whole requests (BEGIN to COMMIT, the wait
	// for a connection included), sorted.
	claims := func(stop <-chan struct{}) (claim, req []time.Duration, err error) {
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		for w := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(rand.Uint64(), uint64(w)))
				tick := time.NewTicker(pace)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					var cl time.Duration
					start := time.Now()
					cerr := b.claimed(ctx, newKey(r), 1, &cl)
					took := time.Since(start)
					mu.Lock()
					if cerr != nil {
						err = cerr
						mu.Unlock()
						return
					}
					claim, req = append(claim, cl), append(req, took)
					mu.Unlock()
				}
			}()
		}
		<-stop
		wg.Wait()
		slices.Sort(claim)
		slices.Sort(req)
		return claim, req, err
	}

	// Claims alone.
	stop := make(chan struct{})
	time.AfterFunc(2*time.Second, func() { close(stop) })
	quietClaim, quietReq, err := claims(stop)
	if err != nil {
		return err
	}
	// Claims during the purge.
	stop = make(chan struct{})
	var (
		busyClaim, busyReq []time.Duration
		cerr               error
		done               = make(chan struct{})
	)
	waitsBefore, err := rowLockWaits(ctx, b)
	if err != nil {
		return err
	}
	go func() {
		busyClaim, busyReq, cerr = claims(stop)
		close(done)
	}()
	start = time.Now()
	n, err := b.store.Purge(ctx, b.db, c.batch)
	took := time.Since(start)
	close(stop)
	<-done
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	waitsAfter, err := rowLockWaits(ctx, b)
	if err != nil {
		return err
	}
	bt := batches.sorted()
	fmt.Printf("\npurge (%d expired keys loaded in %s, batch %d, %d paced claimers):\n", c.purgeRows, load.Round(time.Second), c.batch, claimers)
	fmt.Printf("  purged %d in %s: %.0f rows/s, %d batches, batch p50 %s, longest %s\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), len(bt), ms(pct(bt, 0.5)), ms(pct(bt, 1)))
	show := func(label string, lat []time.Duration) {
		fmt.Printf("  %-30s n=%d p50 %s p99 %s max %s\n", label, len(lat), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)), ms(pct(lat, 1)))
	}
	show("claim, without purge:", quietClaim)
	show("claim, during purge:", busyClaim)
	show("request, without purge:", quietReq)
	show("request, during purge:", busyReq)
	if waitsAfter != nil {
		fmt.Printf("  row lock waits during the purge: %d, %d ms in all (Innodb_row_lock_waits, Innodb_row_lock_time)\n",
			waitsAfter[0]-waitsBefore[0], waitsAfter[1]-waitsBefore[1])
	}
	return nil
}

// rowLockWaits returns InnoDB's counts of row lock waits and of the
// milliseconds spent in them, for the whole server; nil elsewhere.
func rowLockWaits(ctx context.Context, b *bench) ([]int64, error) {
	if !b.d.innodb {
		return nil, nil
	}
	counts := make([]int64, 2)
	for i, name := range []string{"Innodb_row_lock_waits", "Innodb_row_lock_time"} {
		var n string
		if err := b.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &counts[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return counts, nil
}

// batchTimes collects how long each purge statement took: those whose SQL
// begins with prefix.
type batchTimes struct {
	prefix string
	mu     sync.Mutex
	d      []time.Duration
}

func (t *batchTimes) sorted() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := slices.Clone(t.d)
	slices.Sort(d)
	return d
}

type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
}

// timingConnector times the purge statements its connections run.
type timingConnector struct {
	base driver.Driver
	dsn  string
	t    *batchTimes
}

func (c *timingConnector) Connect(context.Context) (driver.Conn, error) {
	cn, err := c.base.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	fc, ok := cn.(fullConn)
	if !ok {
		cn.Close()
		return nil, fmt.Errorf("driver %T lacks context methods", cn)
	}
	return &timingConn{fc, c.t}, nil
}

func (c *timingConnector) Driver() driver.Driver { return c.base }

type timingConn struct {
	fullConn
	t *batchTimes
}

func (c *timingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if !strings.HasPrefix(query, c.t.prefix) {
		return c.fullConn.ExecContext(ctx, query, args)
	}
	start := time.Now()
	r, err := c.fullConn.ExecContext(ctx, query, args)
	if err == nil {
		c.t.mu.Lock()
		c.t.d = append(c.t.d, time.Since(start))
		c.t.mu.Unlock()
	}
	return r, err
}
