// Command campaign runs idem's fault campaign: clients send random
// requests on every surface while faults strike the services and their
// connections, and a checker holds the recorded history against the
// contract's invariants. scripts/campaign runs it on the servers that
// scripts/test starts; docs/reliability.md describes it.
//
// Usage:
//
//	campaign [-db LIST] [-duration D] [-seed N] [-mutate NAME] [-prove LIST [-prove-db LIST]]
//	         [-min-ops N] [-min-faults N] [-min-server-kills N] [-list-mutations]
//
// It prints a line per target, and exits 1 when any invariant was broken,
// keeping the history and printing the command that replays the seed.
// With -prove, it then builds each named known bug into the services and
// runs the campaign again on each target that can find it, and exits 1
// unless every one is found: the checker shown to fail. -min-ops,
// -min-faults and -min-server-kills fail a target whose campaign did less
// than that. The
// same program is each service process of a campaign: it serves when it
// finds its configuration in the environment.
package main

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem/proving/campaign"
)

func main() {
	if cfg := os.Getenv(campaign.EnvService); cfg != "" {
		os.Exit(serve(cfg))
	}
	os.Exit(run())
}

func serve(cfg string) int {
	var c campaign.ServiceConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintln(os.Stderr, "campaign service:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := campaign.Serve(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "campaign service %d: %v\n", c.Index, err)
		return 1
	}
	return 0
}

func run() int {
	var (
		dbs      = flag.String("db", "", "comma-separated targets (sqlite, postgres/pq, postgres/pgx, mariadb, mariadb/MySQL, mysql, tidb, vitess); default every one reachable")
		duration = flag.Duration("duration", 60*time.Second, "how long the workload and its faults run on each target")
		seed     = flag.Uint64("seed", 0, "the seed of the workload and the fault schedule; 0 draws one, which is printed")
		mutate   = flag.String("mutate", "", "build the services with this known bug (see -list-mutations)")
		list     = flag.Bool("list-mutations", false, "list the known bugs that -mutate puts in, and exit")
		prove    = flag.String("prove", "", "after the campaign, comma-separated known bugs to build in, one at a time, each of which the campaign must find on every target of -prove-db that can")
		proveDB  = flag.String("prove-db", "", "comma-separated targets for -prove; default those of -db")
		minOps   = flag.Int("min-ops", 0, "fail a target whose campaign sent fewer operations")
		minFault = flag.Int("min-faults", 0, "fail a target whose campaign caused fewer faults")
		minKills = flag.Int("min-server-kills", 0, "fail a target whose server the campaign can kill and killed fewer times")
		clients  = flag.Int("clients", 6, "client goroutines")
		services = flag.Int("services", 3, "service processes")
		dir      = flag.String("dir", "", "where to keep the histories; default a new temporary directory, deleted when no invariant broke")
	)
	flag.Parse()
	if *list {
		for _, m := range campaign.Mutations {
			fmt.Printf("%-28s invariant %d: %s\n", m.Name, m.Invariant, m.What)
		}
		return 0
	}
	if *seed == 0 {
		var b [8]byte
		_, _ = cryptorand.Read(b[:])
		*seed = binary.BigEndian.Uint64(b[:])>>1 | 1
	}
	targets, err := pick(*dbs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	keep := *dir != ""
	if keep {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	} else {
		if *dir, err = os.MkdirTemp("", "idem-campaign-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	service := ""
	var faults []campaign.Fault
	if *mutate != "" {
		m, err := campaign.MutationNamed(*mutate)
		if err == nil {
			faults = m.Faults
			service, err = campaign.BuildMutated(m, "github.com/idemgo/idem/proving/cmd/campaign", *dir)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Printf("campaign: seed %d\n", *seed)
	failed := false
	for _, tg := range targets {
		rep, err := campaign.Run(ctx, campaign.Config{
			Target: tg, Duration: *duration, Seed: *seed, Clients: *clients, Services: *services,
			Service: service, Faults: faults, Dir: *dir, Log: os.Stderr,
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "campaign: %s: %v\n", tg.Name, err)
			failed = true
			continue
		}
		for i, v := range rep.Violations {
			if i == maxPrinted {
				fmt.Printf("  and %d more violations, in the history\n", len(rep.Violations)-maxPrinted)
				break
			}
			fmt.Println("  violation:", v)
		}
		if len(rep.Violations) > 0 {
			failed = true
			fmt.Printf("  history: %s\n  replay: bash scripts/campaign -db %s -duration %s -seed %d%s\n",
				rep.History, tg.Name, *duration, *seed, mutation(*mutate))
		}
		fmt.Println(rep.Line())
		if n := total(rep.Faults); rep.Ops < *minOps || n < *minFault {
			fmt.Printf("  too little: %d operations and %d faults, want at least %d and %d\n", rep.Ops, n, *minOps, *minFault)
			failed = true
		}
		if n := rep.Faults[campaign.FaultServerKill]; tg.Control != "" && n < *minKills {
			fmt.Printf("  too little: %d server kills, want at least %d\n", n, *minKills)
			failed = true
		}
	}
	if *prove != "" {
		proveTargets := targets
		if *proveDB != "" {
			if proveTargets, err = pick(*proveDB); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		if !proveFound(ctx, strings.Split(*prove, ","), proveTargets, *duration, *seed, *clients, *services, *dir) {
			failed = true
		}
	}
	if failed {
		return 1
	}
	if !keep {
		os.RemoveAll(*dir)
	}
	return 0
}

// proveFound builds each named mutation into the services and runs the
// campaign on each target that can find it, and reports whether every
// one was found on each.
func proveFound(ctx context.Context, names []string, targets []campaign.Target, d time.Duration, seed uint64, clients, services int, dir string) bool {
	ok := true
	for _, name := range names {
		m, err := campaign.MutationNamed(name)
		var bin string
		if err == nil {
			bin, err = campaign.BuildMutated(m, "github.com/idemgo/idem/proving/cmd/campaign", dir)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			ok = false
			continue
		}
		tried := false
		for _, tg := range targets {
			if !m.CanFind(tg) {
				continue
			}
			tried = true
			rep, err := campaign.Run(ctx, campaign.Config{
				Target: tg, Duration: d, Seed: seed, Clients: clients, Services: services,
				Service: bin, Faults: m.Faults, Dir: dir, Log: os.Stderr,
			})
			if err != nil {
				fmt.Fprintf(os.Stderr, "campaign: %s with %s: %v\n", tg.Name, name, err)
				ok = false
				continue
			}
			hits := 0
			for _, v := range rep.Violations {
				if v.Invariant == m.Invariant {
					hits++
				}
			}
			fmt.Printf("campaign: %s built in, on %s: invariant %d broken %d times, %d faults (%d server kills)\n",
				name, tg.Name, m.Invariant, hits, total(rep.Faults), rep.Faults[campaign.FaultServerKill])
			if hits == 0 {
				fmt.Printf("  not found: replay: bash scripts/campaign -db %s -duration %s -seed %d -mutate %s\n", tg.Name, d, seed, name)
				ok = false
			}
		}
		if !tried {
			fmt.Fprintf(os.Stderr, "campaign: no target here can find %s: it shows where the campaign kills the database server, which scripts/campaign's servers allow\n", name)
			ok = false
		}
	}
	return ok
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// maxPrinted is how many violations a target prints at most: a mutation
// breaks its invariant hundreds of times, and the history has them all.
const maxPrinted = 20

func mutation(name string) string {
	if name == "" {
		return ""
	}
	return " -mutate " + name
}

// pick returns the targets that list names, all reachable ones when it is
// empty; a name that is not reachable is an error that says why.
func pick(list string) ([]campaign.Target, error) {
	all := campaign.Targets()
	if list == "" {
		return all, nil
	}
	var ts []campaign.Target
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(all, func(t campaign.Target) bool { return t.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("campaign: no target %q here: run through scripts/campaign, which starts the servers (TiDB with IDEM_TIDB=1, Vitess with IDEM_VITESS=1)", name)
		}
		ts = append(ts, all[i])
	}
	return ts, nil
}
