package idem_test

import (
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestMariaDBDialectOnOtherServers runs the MariaDB dialect on the servers of
// the MySQL family that lack its features: Do fails, and says which dialect
// to use instead.
func TestMariaDBDialectOnOtherServers(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		if tg.Family != "mysql" || strings.HasPrefix(tg.Name, "mariadb") {
			t.Skip("for the MySQL family's servers other than MariaDB")
		}
		tg.Dialect = idem.MariaDB()
		e := setup(t, tg) // the two dialects share the table
		_, err := e.Do(t, "k", hashA, mustNotRun(t), false)
		if err == nil || !strings.Contains(err.Error(), "use idem.MySQL()") {
			t.Fatalf("Do with the MariaDB dialect: %v, want an error that names idem.MySQL()", err)
		}
		t.Log(err)
	})
}
