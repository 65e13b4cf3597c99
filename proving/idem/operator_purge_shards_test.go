package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/driver"
)

// unpinnable is a driver's database that cannot lend a connection: it
// implements driver.DB and not driver.Pinner, and no statement may reach it.
type unpinnable struct{ t *testing.T }

func (u unpinnable) Exec(context.Context, string, ...any) (int64, error) {
	u.t.Error("a statement reached the database")
	return 0, errors.New("unexpected")
}

func (u unpinnable) QueryRow(context.Context, string, []any, ...any) error {
	u.t.Error("a statement reached the database")
	return errors.New("unexpected")
}

func (u unpinnable) Query(context.Context, string, []any, func(func(...any) error) error) error {
	u.t.Error("a statement reached the database")
	return errors.New("unexpected")
}

func (u unpinnable) Begin(context.Context, ...driver.Statement) (driver.Owned[*sql.Tx], []driver.Row, error) {
	u.t.Error("a transaction began on the database")
	return nil, nil, errors.New("unexpected")
}

// TestPurgeShardedNeedsPinner shows that a dialect that purges shard by
// shard refuses, with ErrInvalidArgument and before any statement, a
// driver's database that cannot lend the one connection it targets: it
// would otherwise target a connection of the pool that others then get.
func TestPurgeShardedNeedsPinner(t *testing.T) {
	store, err := idem.New(idem.Vitess())
	if err != nil {
		t.Fatal(err)
	}
	n, err := idem.EngineOf[*sql.Tx](store).Purge(context.Background(), unpinnable{t}, 10)
	if n != 0 || !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Purge = %d, %v; want ErrInvalidArgument", n, err)
	}
}
