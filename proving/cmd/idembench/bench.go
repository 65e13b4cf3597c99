package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bench is one database opened with a store and an orders table of their
// own, dropped by close, and what the paths measured on it need.
type bench struct {
	d     database
	db    *sql.DB
	store *idem.Store
	// lookupFirst is a store of LookupAlways on the same table.
	lookupFirst *idem.Store
	table       string
	orders      string
	insert      string
	queries     map[string]idem.StatementText
	// plain holds the statements of the plain paths, on the idem table.
	plain plainSQL
	// claimFirst is a store of LookupNever on the same table,
	// whose DoTx answers every retry with its claim (see native.go).
	claimFirst *idem.Store
	// lease is the table of the lease paths, when open made one, and
	// leaseSQL its statements.
	lease    string
	leaseSQL leaseSQL
	// http is the order handler behind idemhttp in its default
	// configuration, and leaseHTTP the same handler behind the lease
	// middleware; set when open was asked for them.
	http, leaseHTTP http.Handler
	// pool is the pgx pool of the native paths (native.go), when open was
	// asked for one, and pgxHTTP and pgxLeaseHTTP their handlers, the
	// order handler behind idempgx's middleware and behind the lease
	// middleware on pgx.
	pool                  *pgxpool.Pool
	pgxHTTP, pgxLeaseHTTP http.Handler
}

// openOpts is what open makes besides the idem and orders tables.
type openOpts struct {
	// wrap, when set, wraps the driver's connections.
	wrap func(driver.Driver, string) driver.Connector
	// http builds the idemhttp handler.
	http bool
	// lease creates the lease table and builds the lease handler.
	lease bool
	// pgx opens a pgx pool on the same server, for the native paths, and
	// with http and lease builds their pgx handlers too. Its connections,
	// rather than the *sql.DB's, are opened before measuring.
	pgx bool
}

func open(ctx context.Context, d database, clients int, o openOpts) (*bench, error) {
	db, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		return nil, err
	}
	if o.wrap != nil {
		base := db
		db = sql.OpenDB(o.wrap(base.Driver(), d.dsn))
		base.Close()
	}
	conns := clients + 4
	if d.conns > 0 {
		conns = d.conns
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	var suffix [4]byte
	binary.BigEndian.PutUint32(suffix[:], rand.Uint32())
	id := hex.EncodeToString(suffix[:])
	b := &bench{d: d, db: db, table: "idembench_" + id, orders: "orders_" + id}
	b.store, err = idem.New(d.dialect, idem.WithTable(b.table))
	if err != nil {
		db.Close()
		return nil, err
	}
	b.lookupFirst, err = idem.New(d.dialect, idem.WithTable(b.table), idem.WithLookupFirst(idem.LookupAlways))
	if err != nil {
		db.Close()
		return nil, err
	}
	b.claimFirst, err = idem.New(d.dialect, idem.WithTable(b.table), idem.WithLookupFirst(idem.LookupNever))
	if err != nil {
		db.Close()
		return nil, err
	}
	b.queries = b.store.Queries()
	b.insert = strings.ReplaceAll(d.insert, "%s", b.orders)
	b.plain = newPlainSQL(d.kind, b.table)
	if err := b.store.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.ExecContext(ctx, strings.ReplaceAll(d.orders, "%s", b.orders)); err != nil {
		b.close()
		return nil, err
	}
	if o.lease {
		b.lease = "lease_" + id
		b.leaseSQL = newLeaseSQL(d.kind, b.lease)
		if _, err := db.ExecContext(ctx, b.leaseSQL.create); err != nil {
			b.close()
			return nil, fmt.Errorf("create lease table: %w", err)
		}
		b.leaseHTTP = &leaseMiddleware{db: sqlLeases{db: db, q: b.leaseSQL}, next: b.orderHandler()}
	}
	if o.http {
		mw, err := idemhttp.New(b.store, db, nil, idemhttp.WithSingleClient())
		if err != nil {
			b.close()
			return nil, err
		}
		b.http = mw.Handler(b.orderHandler())
	}
	if o.pgx {
		if err := b.openPool(ctx, conns, o); err != nil {
			b.close()
			return nil, err
		}
		if err := b.warmPool(ctx, min(clients, conns)); err != nil {
			b.close()
			return nil, err
		}
		return b, nil
	}
	// Open every connection before measuring.
	var held []*sql.Conn
	for range min(clients, conns) {
		cn, err := db.Conn(ctx)
		if err != nil {
			b.close()
			return nil, err
		}
		held = append(held, cn)
	}
	for _, cn := range held {
		cn.Close()
	}
	return b, nil
}

func (b *bench) close() {
	if b.pool != nil {
		b.pool.Close()
	}
	for _, t := range []string{b.table, b.orders, b.lease} {
		if t != "" {
			_, _ = b.db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+t)
		}
	}
	b.db.Close()
}

// The request every path handles: a fixed request hash, and the response
// that the work answers.
var (
	reqHash  = sha256.Sum256([]byte(`POST /orders {"item":42,"qty":1}`))
	response = idem.Response{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"order":"accepted"}`),
	}
)

// newKey returns a random key shaped like a UUID, 36 bytes.
func newKey(r *rand.Rand) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], r.Uint64())
	binary.BigEndian.PutUint64(b[8:], r.Uint64())
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// effect inserts n order rows for key.
func (b *bench) effect(ctx context.Context, tx *sql.Tx, key []byte, n int) error {
	for i := range n {
		if _, err := tx.ExecContext(ctx, b.insert, key, int64(42+i), int64(1)); err != nil {
			return err
		}
	}
	return nil
}

// result is what one measurement counted.
type result struct {
	ops      int64
	elapsed  time.Duration
	lat      []time.Duration // per operation, sorted
	extraLat []time.Duration // a second latency per operation, sorted, when measured
}

func (r result) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	i := int(float64(len(lat)-1) * p)
	return lat[i]
}

// op is one operation of a worker; extra, when set, is a second latency to
// record (the claim's, within the operation).
type op func(ctx context.Context, r *rand.Rand, extra *time.Duration) error

// measure runs op from clients workers for d, after a warm-up of d/10, and
// stops at the first error, or when ctx is done.
func measure(ctx context.Context, clients int, d time.Duration, o op) (result, error) {
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		counting atomic.Bool
		mu       sync.Mutex
		res      result
		firstErr error
	)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(rand.Uint64(), uint64(w)))
			var lat, extra []time.Duration
			for !stop.Load() {
				var x time.Duration
				start := time.Now()
				if err := o(ctx, r, &x); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					stop.Store(true)
					return
				}
				if counting.Load() {
					lat = append(lat, time.Since(start))
					if x > 0 {
						extra = append(extra, x)
					}
				}
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.extraLat = append(res.extraLat, extra...)
			mu.Unlock()
		}()
	}
	sleep(ctx, d/10)
	counting.Store(true)
	start := time.Now()
	sleep(ctx, d)
	counting.Store(false)
	res.elapsed = time.Since(start)
	stop.Store(true)
	wg.Wait()
	res.ops = int64(len(res.lat))
	slices.Sort(res.lat)
	slices.Sort(res.extraLat)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

// sleep sleeps for d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// med returns the median of xs: the middle value, or the mean of the two
// middle ones.
func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func fmtRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
