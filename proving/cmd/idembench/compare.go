package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/idemgo/idem"
)

// path is one way of handling requests that the comparison measures, each
// time on fresh tables.
type path struct {
	name string
	run  func(ctx context.Context, c config, d database) (result, error)
}

// keyed is a path whose every request has a new key; token is a claim
// token of its own, for the paths that bind one.
func keyed(name string, o openOpts, f func(b *bench, ctx context.Context, key string, token int64) error) path {
	return path{name, func(ctx context.Context, c config, d database) (result, error) {
		b, err := open(ctx, d, c.clients, o)
		if err != nil {
			return result{}, err
		}
		defer b.close()
		var token atomic.Int64
		token.Store(rand.Int64N(1 << 40))
		return measure(ctx, c.clients, c.duration, func(ctx context.Context, r *rand.Rand, _ *time.Duration) error {
			return f(b, ctx, newKey(r), token.Add(1))
		})
	}}
}

// replayKeys is how many finished keys the replay paths retry.
const replayKeys = 10000

// retried is a path that retries finished requests: fill finishes
// replayKeys keys (the same keys on every path), then each request retries
// one of them, at random, with replay.
func retried(name string, o openOpts, fill, replay func(b *bench, ctx context.Context, key string) error) path {
	return path{name, func(ctx context.Context, c config, d database) (result, error) {
		b, err := open(ctx, d, c.clients, o)
		if err != nil {
			return result{}, err
		}
		defer b.close()
		keys := make([]string, replayKeys)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range keys {
			keys[i] = newKey(r)
		}
		var (
			next     atomic.Int64
			wg       sync.WaitGroup
			mu       sync.Mutex
			firstErr error
		)
		for range c.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= replayKeys {
						return
					}
					if err := fill(b, ctx, keys[i]); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = fmt.Errorf("finish the keys to retry: %w", err)
						}
						mu.Unlock()
						next.Store(replayKeys)
						return
					}
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return result{}, firstErr
		}
		return measure(ctx, c.clients, c.duration, func(ctx context.Context, r *rand.Rand, _ *time.Duration) error {
			return replay(b, ctx, keys[r.IntN(replayKeys)])
		})
	}}
}

// claimedPath and replayPath are idem's paths, which the settings scenario
// measures too.
var (
	claimedPath = keyed("claimed", openOpts{}, func(b *bench, ctx context.Context, key string, _ int64) error {
		return b.claimed(ctx, key, 1, nil)
	})
	replayPath = retried("replay", openOpts{}, finishClaimed, (*bench).replay)
)

// finishClaimed finishes a key through idem, for the replay paths that
// retry idem's own records.
func finishClaimed(b *bench, ctx context.Context, key string) error {
	return b.claimed(ctx, key, 1, nil)
}

// paths returns the paths of the comparison that the scenarios select
// under driver setting s: idem's on database/sql and the design without it,
// or, on a native setting, those of nativePaths.
func paths(c config, s setting) []path {
	if s.native {
		return nativePaths(c)
	}
	var ps []path
	for _, n := range []int{1, 5} {
		if n == 5 && !c.scenarios["effect5"] {
			continue
		}
		suffix := ""
		if n == 5 {
			suffix = " x5"
		}
		if c.scenarios["bare"] {
			ps = append(ps, keyed("bare"+suffix, openOpts{}, func(b *bench, ctx context.Context, key string, _ int64) error {
				return b.bare(ctx, key, n)
			}))
		}
		if c.scenarios["plain"] {
			ps = append(ps, keyed("plain"+suffix, openOpts{}, func(b *bench, ctx context.Context, key string, tok int64) error {
				return b.plainNew(ctx, key, n, tok)
			}))
		}
		if c.scenarios["hand"] {
			ps = append(ps, keyed("hand"+suffix, openOpts{}, func(b *bench, ctx context.Context, key string, tok int64) error {
				return b.hand(ctx, key, n, tok, false)
			}))
		}
		if c.scenarios["claimed"] {
			ps = append(ps, keyed("claimed"+suffix, openOpts{}, func(b *bench, ctx context.Context, key string, _ int64) error {
				return b.claimed(ctx, key, n, nil)
			}))
		}
	}
	if c.scenarios["lookupfirst"] {
		ps = append(ps,
			keyed("hand lookup-first", openOpts{}, func(b *bench, ctx context.Context, key string, tok int64) error {
				return b.hand(ctx, key, 1, tok, true)
			}),
			keyed("claimed lookup-first", openOpts{}, func(b *bench, ctx context.Context, key string, _ int64) error {
				return b.lookupFirstDoTx(ctx, key, idem.Claimed)
			}))
	}
	if c.scenarios["replay"] {
		ps = append(ps, replayPath)
	}
	if c.scenarios["plain"] {
		ps = append(ps, retried("plain replay", openOpts{}, finishClaimed, (*bench).plainReplay))
	}
	if c.scenarios["lookupfirst"] {
		ps = append(ps, retried("replay lookup-first", openOpts{}, finishClaimed, func(b *bench, ctx context.Context, key string) error {
			return b.lookupFirstDoTx(ctx, key, idem.Replay)
		}))
	}
	if c.scenarios["http"] {
		ps = append(ps, web("http", openOpts{http: true}, func(b *bench) http.Handler { return b.http })...)
	}
	if c.scenarios["lease"] {
		ps = append(ps, web("lease", openOpts{lease: true}, func(b *bench) http.Handler { return b.leaseHTTP })...)
	}
	return ps
}

// web returns the two paths of a middleware: name, which posts new orders
// through the handler h gives, and name+" replay", which posts again one of
// the orders it finished. The http and lease sides post the same orders,
// each through its own middleware.
func web(name string, o openOpts, h func(*bench) http.Handler) []path {
	order := func(b *bench, ctx context.Context, key string) error { return post(ctx, h(b), key, false) }
	return []path{
		keyed(name, o, func(b *bench, ctx context.Context, key string, _ int64) error { return order(b, ctx, key) }),
		retried(name+" replay", o, order,
			func(b *bench, ctx context.Context, key string) error { return post(ctx, h(b), key, true) }),
	}
}

// ratios are the ratios printed under each table: a's rate over b's, taken
// round by round.
var ratios = []struct{ label, a, b string }{
	{"claimed / plain", "claimed", "plain"},
	{"claimed / claimed sql", "claimed", "claimed sql"},
	{"claimed / hand", "claimed", "hand"},
	{"claimed / bare", "claimed", "bare"},
	{"plain / bare", "plain", "bare"},
	{"claimed x5 / plain x5", "claimed x5", "plain x5"},
	{"claimed x5 / claimed sql x5", "claimed x5", "claimed sql x5"},
	{"claimed x5 / hand x5", "claimed x5", "hand x5"},
	{"claimed x5 / bare x5", "claimed x5", "bare x5"},
	{"replay / claimed", "replay", "claimed"},
	{"replay / plain replay", "replay", "plain replay"},
	{"replay / replay sql", "replay", "replay sql"},
	{"claimed l-f / hand l-f", "claimed lookup-first", "hand lookup-first"},
	{"claimed lookup-first / claimed", "claimed lookup-first", "claimed"},
	{"replay lookup-first / replay", "replay lookup-first", "replay"},
	{"replay l-f / claimed l-f", "replay lookup-first", "claimed lookup-first"},
	{"http / lease", "http", "lease"},
	{"http replay / lease replay", "http replay", "lease replay"},
	{"http / http sql", "http", "http sql"},
	{"http replay / http sql replay", "http replay", "http sql replay"},
}

// group is the measurements of one driver setting under one commit mode.
type group struct {
	name, commit, desc string
	paths              []path
	rates              map[string][]float64 // per path, per round
	last               map[string]result
}

// rotate returns xs rotated left by n.
func rotate[T any](xs []T, n int) []T {
	if len(xs) == 0 {
		return nil
	}
	n %= len(xs)
	return append(slices.Clone(xs[n:]), xs[:n]...)
}

// measurePaths compares the paths of the scenarios on k, under each of the
// driver settings and commit modes chosen, in c.rounds rounds. Each round
// measures every path of every setting once under every mode, each on fresh
// tables: the modes alternate in order from round to round (one switch of
// the server between rounds), and the settings and paths are rotated, so
// that no path always runs first or last. The ratios are taken round by
// round, between paths of the same setting and mode.
func measurePaths(ctx context.Context, c config, k *kind, dir string, settings []setting) (err error) {
	ps := map[string][]path{}
	some := false
	for _, s := range settings {
		ps[s.key] = paths(c, s)
		some = some || len(ps[s.key]) > 0
	}
	if !some {
		return nil
	}
	mainDSN, _ := k.serverDSN(dir)
	main, _ := k.setting(k.main)
	sw, err := k.commits(ctx, main.driver, mainDSN)
	if err != nil {
		if slices.Contains(c.commits, commitDurable) {
			return fmt.Errorf("commit settings: %w", err)
		}
		sw = nil // fast alone needs no switch; the heading says less
	}
	if sw != nil {
		defer func() {
			rctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
			defer cancel()
			if rerr := sw.restore(rctx); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restore the commit settings: %w", rerr))
			}
		}()
	}
	groups := map[string]*group{}
	var order []*group
	for round := range c.rounds {
		modes := slices.Clone(c.commits)
		if round%2 == 1 {
			slices.Reverse(modes)
		}
		for _, mode := range modes {
			desc := "as the server runs"
			if sw != nil {
				if desc, err = sw.set(ctx, mode); err != nil {
					return fmt.Errorf("%s commits: %w", mode, err)
				}
			}
			for _, s := range rotate(settings, round) {
				if len(ps[s.key]) == 0 {
					continue // the scenarios select none of its paths
				}
				d, _ := k.database(dir, s, mode)
				id := d.name + "\x00" + mode
				g := groups[id]
				if g == nil {
					g = &group{name: d.name, commit: mode, paths: ps[s.key], rates: map[string][]float64{}, last: map[string]result{}}
					groups[id] = g
				}
				g.desc = desc
				var line []string
				for _, p := range rotate(g.paths, round) {
					res, err := p.run(ctx, c, d)
					if err != nil {
						return fmt.Errorf("%s, %s commits, %s: %w", d.name, mode, p.name, err)
					}
					g.rates[p.name] = append(g.rates[p.name], res.rate())
					g.last[p.name] = res
					line = append(line, fmt.Sprintf("%s %.0f", p.name, res.rate()))
				}
				fmt.Fprintf(os.Stderr, "idembench: round %d/%d, %s, %s commits: %s\n", round+1, c.rounds, d.name, mode, strings.Join(line, ", "))
			}
		}
	}
	// The tables, in the order of -drivers and -commits.
	for _, s := range settings {
		for _, mode := range c.commits {
			d, _ := k.database(dir, s, mode)
			if g := groups[d.name+"\x00"+mode]; g != nil {
				order = append(order, g)
			}
		}
	}
	for _, g := range order {
		g.print()
	}
	return nil
}

func (g *group) print() {
	fmt.Printf("\n### %s, %s commits (%s)\n", g.name, g.commit, g.desc)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\trequests/s (median)\trounds\tp50\tp99\t")
	for _, p := range g.paths {
		rates, res := g.rates[p.name], g.last[p.name]
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t\n", p.name, med(rates), fmtRates(rates), ms(pct(res.lat, 0.5)), ms(pct(res.lat, 0.99)))
	}
	tw.Flush()
	for _, r := range ratios {
		a, b := g.rates[r.a], g.rates[r.b]
		if len(a) == 0 || len(a) != len(b) {
			continue
		}
		per := make([]float64, len(a))
		for i := range a {
			per[i] = a[i] / b[i]
		}
		fmt.Printf("  %-32s %.3f (%.3f–%.3f, %d rounds)\n", r.label, med(per), slices.Min(per), slices.Max(per), len(per))
	}
}
