// Package sqltx hands a connection of database/sql (a *sql.DB, *sql.Tx or
// *sql.Conn) to what takes idem's driver.Tx, such as a dialect's
// TableInspector, for the module's tools and tests: the idem command, the
// benchmarks and the tests send their statements on idem's table the way
// the Store sends its own. Package idem keeps its own, which allocates
// nothing per statement.
package sqltx

import (
	"context"
	"database/sql"

	"github.com/idemgo/idem/driver"
)

// Conn is what database/sql's *sql.DB, *sql.Tx and *sql.Conn have in common.
type Conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Of returns c as a driver.Tx: its statements run where c runs them, in
// c's transaction if it is one.
func Of(c Conn) driver.Tx { return tx{c} }

type tx struct{ c Conn }

func (t tx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	r, err := t.c.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func (t tx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return t.c.QueryRowContext(ctx, query, args...).Scan(dest...)
}

func (t tx) Query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	rows, err := t.c.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
