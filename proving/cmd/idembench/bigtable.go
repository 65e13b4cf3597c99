package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"text/tabwriter"
	"time"

	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/internal/sqltx"
)

// measureBigTable compares claims into a table of smallRows live keys with
// claims into one of bigRows. Both tables are loaded first; the rounds then
// alternate between them, and the median claim p50 of each counts.
func measureBigTable(ctx context.Context, c config, d database) error {
	fmt.Printf("\nbig table (claimed path, %d clients, %d round(s)):\n", c.clients, c.rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "live keys\tload\ttable and indexes\trequests/s\tclaim p50 (median)\trounds\tclaim p99\trequest p50\trequest p99\t")
	sizes := []int{c.smallRows, c.bigRows}
	benches := make([]*bench, len(sizes))
	loads := make([]time.Duration, len(sizes))
	tables := make([]int64, len(sizes))
	defer func() {
		for _, b := range benches {
			if b != nil {
				b.close()
			}
		}
	}()
	for i, n := range sizes {
		b, err := open(ctx, d, c.clients, openOpts{})
		if err != nil {
			return err
		}
		benches[i] = b
		start := time.Now()
		if err := d.load(ctx, b.db, b.table, n, false); err != nil {
			return fmt.Errorf("load %d: %w", n, err)
		}
		loads[i] = time.Since(start)
		if tables[i], err = b.tableMB(ctx); err != nil {
			return fmt.Errorf("table size: %w", err)
		}
	}
	p50s := make([][]float64, len(sizes))
	last := make([]result, len(sizes))
	for range c.rounds {
		for i, b := range benches {
			res, err := measure(ctx, c.clients, c.duration, func(ctx context.Context, r *rand.Rand, claim *time.Duration) error {
				return b.claimed(ctx, newKey(r), 1, claim)
			})
			if err != nil {
				return err
			}
			p50s[i] = append(p50s[i], float64(pct(res.extraLat, 0.5).Microseconds()))
			last[i] = res
		}
	}
	for i, n := range sizes {
		res := last[i]
		fmt.Fprintf(tw, "%d\t%s\t%d MB\t%.0f\t%s\t%s µs\t%s\t%s\t%s\t\n", n, loads[i].Round(time.Second), tables[i], res.rate(),
			ms(time.Duration(med(p50s[i]))*time.Microsecond), fmtRates(p50s[i]), ms(pct(res.extraLat, 0.99)), ms(pct(res.lat, 0.5)), ms(pct(res.lat, 0.99)))
	}
	tw.Flush()
	if small := med(p50s[0]); small > 0 {
		fmt.Printf("  %-34s %.3f\n", "claim p50, big / small", med(p50s[1])/small)
	}
	return nil
}

// tableMB returns the size of the idem table with its indexes, in MB.
func (b *bench) tableMB(ctx context.Context) (int64, error) {
	ins, ok := b.d.dialect.(dialect.TableInspector)
	if !ok {
		return 0, fmt.Errorf("the %s dialect does not implement dialect.TableInspector", b.d.dialect.Name())
	}
	if b.d.analyze != "" {
		if _, err := b.db.ExecContext(ctx, fmt.Sprintf(b.d.analyze, b.table)); err != nil {
			return 0, err
		}
	}
	size, _, err := ins.TableSize(ctx, sqltx.Of(b.db), b.table)
	return size >> 20, err
}
