package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// measureClaimStatement times, with one client, the PostgreSQL claim
// statement alone against the plain INSERT of the design and the steps
// between them, each in a transaction that is rolled back, calls of every
// statement interleaved round by round: what each part of the claim costs
// the server and the driver, apart from the queue of many clients.
func measureClaimStatement(ctx context.Context, c config, d database) error {
	const calls = 400
	b, err := open(ctx, d, 1, openOpts{})
	if err != nil {
		return err
	}
	defer b.close()
	var oid int64
	if err := b.db.QueryRowContext(ctx, `SELECT '"`+b.table+`"'::regclass::oid`).Scan(&oid); err != nil {
		return err
	}
	const (
		cols = `(key, request_hash, created_at, expires_at, token)`
		ten  = `true, false, request_hash, status, header, body, checksum, created_at, expires_at, token`
	)
	claim := b.queries["Claim"]
	regclass := `'"` + b.table + `"'::regclass::oid`
	if !strings.Contains(claim.SQL, regclass) {
		return fmt.Errorf("the claim does not name its table as %s", regclass)
	}
	stmts := []struct {
		name, sql string
		params    []string
	}{
		{"plain INSERT", `INSERT INTO ` + b.table + ` ` + cols + ` VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING RETURNING key`, nil},
		{"returning a claim's ten columns", `INSERT INTO ` + b.table + ` ` + cols + ` VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO NOTHING RETURNING ` + ten, nil},
		{"as INSERT ... SELECT", `INSERT INTO ` + b.table + ` ` + cols + ` SELECT $1::bytea, $2::bytea, $3::bigint, $4::bigint, $5::bigint ON CONFLICT (key) DO NOTHING RETURNING ` + ten, nil},
		{"the claim (with the advisory lock)", claim.SQL, claim.Params},
		{"the claim, its table's OID a constant", strings.Replace(claim.SQL, regclass, fmt.Sprint(oid), 1), claim.Params},
	}
	lat := make([][]time.Duration, len(stmts))
	cpu := make([]time.Duration, len(stmts))
	backend := backendCPU(ctx, b)
	for range c.rounds {
		for i, st := range stmts {
			before, _ := backend()
			for range calls {
				key := make([]byte, 36)
				rand.Read(key)
				now := time.Now().UnixMicro()
				vals := map[string]any{"key": key, "request_hash": reqHash[:], "created_at": now,
					"expires_at": now + (24 * time.Hour).Microseconds(), "token": int64(7), "lock_id": int64(42)}
				args := []any{key, reqHash[:], now, vals["expires_at"], int64(7)}
				if st.params != nil {
					args = args[:0]
					for _, p := range st.params {
						args = append(args, vals[p])
					}
				}
				tx, err := b.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				start := time.Now()
				rows, err := tx.QueryContext(ctx, st.sql, args...)
				if err == nil {
					for rows.Next() {
					}
					err = rows.Close()
				}
				lat[i] = append(lat[i], time.Since(start))
				_ = tx.Rollback()
				if err != nil {
					return fmt.Errorf("%s: %w", st.name, err)
				}
			}
			after, ok := backend()
			cpu[i] += after - before
			if !ok {
				cpu = nil
			}
		}
	}
	fmt.Printf("\n%s: the claim statement alone (one client, %d rounds of %d calls each): the median time of a call", d.name, c.rounds, calls)
	if cpu != nil {
		fmt.Print(", and the server's CPU time per call with its BEGIN and ROLLBACK")
	}
	fmt.Println(":")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, st := range stmts {
		slices.Sort(lat[i])
		fmt.Fprintf(tw, "%s\t%d µs\t", st.name, lat[i][len(lat[i])/2].Microseconds())
		if cpu != nil {
			fmt.Fprintf(tw, "%d µs CPU\t", cpu[i].Microseconds()/int64(c.rounds*calls))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// backendCPU returns a function that reads how much CPU time the
// PostgreSQL backend serving b's one connection has used, from the
// kernel's scheduler statistics: ok is false when the server does not run
// on this machine, or the statistics cannot be read. Unlike a timing seen
// from the client, it leaves out the network, the driver and the wait for
// a core, which makes small differences between statements visible.
func backendCPU(ctx context.Context, b *bench) func() (used time.Duration, ok bool) {
	var pid int
	err := b.db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		return func() (time.Duration, bool) { return 0, false } // a server elsewhere
	}
	return func() (time.Duration, bool) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			return 0, false
		}
		var ns int64
		if _, err := fmt.Sscan(string(stat), &ns); err != nil || ns == 0 {
			return 0, false
		}
		return time.Duration(ns), true
	}
}
