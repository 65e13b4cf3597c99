package campaign

import (
	"strings"

	"github.com/idemgo/idem/proving/dbtest"
)

// Targets lists the targets the campaign can reach: SQLite always, then
// the servers whose variables scripts/servers.bash set. TiDB runs in its
// default, pessimistic mode only: in optimistic mode two requests may both
// run their work before the conflict at commit, as docs/contract.md says.
func Targets() []Target {
	ts := []Target{{Name: "sqlite", Family: "sqlite", Dialect: "sqlite", Driver: "sqlite"}}
	servers := append(dbtest.Servers(), dbtest.TiDBServers()...)
	servers = append(servers, dbtest.VitessServers()...)
	for _, s := range servers {
		if s.Name == "tidb/optimistic" {
			continue
		}
		ts = append(ts, Target{Name: s.Name, Family: s.Family, Dialect: dialectName(s.Name), Driver: s.Driver, DSN: s.DSN,
			Control: controlOf(s.Name)})
	}
	return ts
}

// dialectName is the dialect of the proving ground's target called name.
func dialectName(name string) string {
	switch {
	case strings.HasPrefix(name, "postgres"):
		return "postgres"
	case name == "mariadb":
		return "mariadb"
	case strings.HasPrefix(name, "tidb"):
		return "tidb"
	case name == "vitess":
		return "vitess"
	}
	return "mysql" // mysql, and mariadb/MySQL
}
