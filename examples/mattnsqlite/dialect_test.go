package mattnsqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/idemgo/idem/examples/mattnsqlite"
	"github.com/idemgo/idem/idemtest"
)

func TestDialect(t *testing.T) {
	idemtest.TestDialect(t, mattnsqlite.Dialect(), func(t *testing.T) *sql.DB {
		path := filepath.Join(t.TempDir(), "idem.db")
		db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_busy_timeout=10000&_journal_mode=WAL")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
