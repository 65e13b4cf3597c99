package dialect_test

import (
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// TestMariaDBDialectOnOtherServers runs the MariaDB dialect on the servers of
// the MySQL family that lack its features: Do fails, and says which dialect
// to use instead.
func TestMariaDBDialectOnOtherServers(t *testing.T) {
	dbtest.ForEachTarget(t, func(t *testing.T, tg dbtest.Target) {
		if tg.Family != "mysql" || strings.HasPrefix(tg.Name, "mariadb") {
			t.Skip("for the MySQL family's servers other than MariaDB")
		}
		tg.Dialect = idem.MariaDB()
		e := tg.Setup(t) // the two dialects share the table
		_, err := e.Do(t, "k", dbtest.HashA, dbtest.MustNotRun(t), false)
		if err == nil || !strings.Contains(err.Error(), "use idem.MySQL()") {
			t.Fatalf("Do with the MariaDB dialect: %v, want an error that names idem.MySQL()", err)
		}
		t.Log(err)
	})
}
