package campaign

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// mutationSeeds are the recorded seeds with which TestMutationsAreFound
// runs each mutation.
var mutationSeeds = map[string]uint64{
	"claim-skips-fingerprint":     42,
	"callkey-without-incarnation": 42,
	"purge-ignores-expiry":        42,
	"operators-ignore-lease":      42,
	"forget-unfinished":           42,
	"release-past-phases":         42,
}

// TestMutationsAreFound shows that the checker can fail: each known bug of
// Mutations, built into the services, is reported by the campaign as its
// invariant broken, on SQLite, PostgreSQL (through pgx) and MariaDB,
// within mutationRun of workload and faults from a recorded seed. The
// bugs that only server kills show are proven where the campaign kills
// servers, by scripts/campaign's -prove, which .ci/run runs.
func TestMutationsAreFound(t *testing.T) {
	if testing.Short() {
		t.Skip("the mutations take minutes: run without -short")
	}
	targets := campaignTargets(t)
	for _, m := range Mutations {
		if m.ServerKills {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			seed, ok := mutationSeeds[m.Name]
			if !ok {
				t.Fatalf("mutation %s has no recorded seed", m.Name)
			}
			bin, err := BuildMutated(m, "github.com/idemgo/idem/proving/cmd/campaign", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			for _, tg := range targets {
				t.Run(tg.Name, func(t *testing.T) {
					rep, err := Run(context.Background(), Config{
						Target: tg, Duration: mutationRun, Seed: seed, Clients: 6, Services: 3,
						Service: bin, Faults: m.Faults, Dir: t.TempDir(), Log: os.Stderr,
					})
					if err != nil {
						t.Fatal(err)
					}
					var hits []Violation
					for _, v := range rep.Violations {
						if v.Invariant == m.Invariant {
							hits = append(hits, v)
						}
					}
					if len(hits) == 0 {
						var seen []string
						for _, v := range rep.Violations {
							seen = append(seen, v.String())
						}
						t.Fatalf("%s\nnot found: no violation of invariant %d; found:\n%s", rep.Line(), m.Invariant, strings.Join(seen, "\n"))
					}
					t.Logf("%s\nfound %d times, first: %s", rep.Line(), len(hits), hits[0])
				})
			}
		})
	}
}

// mutationRun is how long each mutation's campaign runs on each target.
const mutationRun = 30 * time.Second

// TestCampaignHoldsTheContract runs the campaign without a mutation on
// SQLite, PostgreSQL (through pgx) and MariaDB, with a seed drawn anew
// and logged, and fails on any violation: every run of the suite
// explores another schedule.
func TestCampaignHoldsTheContract(t *testing.T) {
	if testing.Short() {
		t.Skip("the campaign takes minutes: run without -short")
	}
	seed := uint64(time.Now().UnixNano())>>1 | 1
	for _, tg := range campaignTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rep, err := Run(context.Background(), Config{
				Target: tg, Duration: mutationRun, Seed: seed, Clients: 6, Services: 3,
				Dir: t.TempDir(), Log: os.Stderr,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range rep.Violations {
				t.Error(v)
			}
			t.Log(rep.Line())
			if t.Failed() {
				t.Logf("replay: bash scripts/campaign -db %s -duration %s -seed %d", tg.Name, mutationRun, seed)
			}
		})
	}
}

// campaignTargets returns SQLite, PostgreSQL through pgx and MariaDB, and
// skips t unless all three are reachable: the campaigns take minutes, and
// run where scripts/test starts the servers.
func campaignTargets(t *testing.T) []Target {
	var targets []Target
	for _, name := range []string{"sqlite", "postgres/pgx", "mariadb"} {
		i := slices.IndexFunc(Targets(), func(tg Target) bool { return tg.Name == name })
		if i < 0 {
			t.Skipf("%s is not reachable: run through scripts/test, which starts PostgreSQL and MariaDB", name)
		}
		targets = append(targets, Targets()[i])
	}
	return targets
}
