package idempgx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", with which the suite sets up and inspects

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idempgx"
	"github.com/idemgo/idem/idemtest"
	"github.com/idemgo/idem/proving/dbtest"
)

// envPostgres names the PostgreSQL that scripts/test starts.
const envPostgres = "IDEM_POSTGRES_DSN"

// torturePool is the size of each property's pool: the 32 goroutines of the
// Torture property and a few more, as the suite gives database/sql, so
// that they race on pgx as they do there instead of taking turns.
const torturePool = 36

// TestConformance runs idemtest's whole contract of Do, DoTx, Run and
// Resume on idempgx: the Store's calls, the Funcs' statements and the transactions the
// properties hold go through pgx's own interface, while the suite sets up
// and inspects the same tables through pgx's database/sql driver. It runs
// on PostgreSQL itself and behind PgBouncer in transaction mode, where the
// pool and the suite's database/sql connections open pgx with
// dbtest.PgxPoolerParams.
func TestConformance(t *testing.T) {
	for _, tg := range pgxTargets() {
		t.Run(tg.name, func(t *testing.T) {
			if tg.dsn == "" {
				t.Skip(tg.skip)
			}
			conformance(t, tg.dsn)
		})
	}
}

// pgxTarget is a PostgreSQL that the tests of pgx's pools run against, or
// why they cannot.
type pgxTarget struct {
	name, dsn, skip string
}

// pgxTargets are PostgreSQL itself and PostgreSQL behind PgBouncer, each
// with the reason to skip it when scripts/test did not start it.
func pgxTargets() []pgxTarget {
	bouncer := dbtest.PgBouncerDSN()
	if bouncer != "" {
		bouncer = dbtest.WithParams(bouncer, dbtest.PgxPoolerParams)
	}
	return []pgxTarget{
		{name: "postgres/pgxpool", dsn: os.Getenv(envPostgres),
			skip: envPostgres + " is not set: run scripts/test from the repository root, which starts PostgreSQL"},
		{name: "postgres/pgbouncer/pgxpool", dsn: bouncer, skip: dbtest.SkipPgBouncerReason},
	}
}

func conformance(t *testing.T, source string) {
	open := func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", source)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	idemtest.TestDriver(t, idem.Postgres(), open, func(t *testing.T, _ *sql.DB) idemtest.Driver {
		cfg, err := pgxpool.ParseConfig(source)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = torturePool
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pgxDriver{pool: pool}
	})
}

// pgxDriver is idempgx as an idemtest.Driver: Do, DoTx, Refusable, Run,
// Resume and Forget of this package, on pgx transactions of a pool.
type pgxDriver struct{ pool *pgxpool.Pool }

// pgxTx is a pgx.Tx as an idemtest.Tx.
type pgxTx struct{ tx pgx.Tx }

func (d pgxDriver) Begin(ctx context.Context, opts *sql.TxOptions) (idemtest.Tx, error) {
	o, err := txOptions(opts)
	if err != nil {
		return nil, err
	}
	tx, err := d.pool.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return pgxTx{tx: tx}, nil
}

func (d pgxDriver) Do(ctx context.Context, s *idem.Store, tx idemtest.Tx, key string, reqHash []byte, fn idemtest.Func) (idem.Result, error) {
	ptx, err := unwrap(tx)
	if err != nil {
		return idem.Result{}, err
	}
	return idempgx.New(s).Do(ctx, ptx, key, reqHash, pgxFunc(fn))
}

func (d pgxDriver) DoTx(ctx context.Context, s *idem.Store, opts *sql.TxOptions, key string, reqHash []byte, fn idemtest.Func) (idem.Result, error) {
	o, err := txOptions(opts)
	if err != nil {
		return idem.Result{}, err
	}
	return idempgx.New(s).DoTx(ctx, d.pool, o, key, reqHash, pgxFunc(fn))
}

func (d pgxDriver) Refusable(fn idemtest.Func) idemtest.Func {
	refusable := idempgx.Refusable(pgxFunc(fn))
	return func(ctx context.Context, tx idemtest.Tx) (idem.Response, error) {
		ptx, err := unwrap(tx)
		if err != nil {
			return idem.Response{}, err
		}
		return refusable(ctx, ptx)
	}
}

func (d pgxDriver) Phase(name string, fn func(ctx context.Context, tx idemtest.Tx) error) idem.Step {
	return idem.Phase(name, func(ctx context.Context, tx pgx.Tx) error { return fn(ctx, pgxTx{tx: tx}) })
}

func (d pgxDriver) Final(name string, fn idemtest.Func) idem.Step {
	return idem.Final(name, pgxFunc(fn))
}

func (d pgxDriver) Run(ctx context.Context, s *idem.Store, key string, reqHash []byte, steps ...idem.Step) (idem.Result, error) {
	return idempgx.New(s).Run(ctx, d.pool, pgx.TxOptions{}, key, reqHash, steps...)
}

func (d pgxDriver) Resume(ctx context.Context, s *idem.Store, steps idem.StepsFunc, options ...idem.ResumeOption) (idem.ResumeReport, error) {
	return idempgx.New(s).Resume(ctx, d.pool, pgx.TxOptions{}, steps, options...)
}

func (d pgxDriver) Forget(ctx context.Context, s *idem.Store, key string) error {
	return idempgx.New(s).Forget(ctx, d.pool, key)
}

// unwrap returns the pgx.Tx of tx, nil for a nil tx, so that idempgx sees
// the nil transaction that a property passes.
func unwrap(tx idemtest.Tx) (pgx.Tx, error) {
	if tx == nil {
		return nil, nil
	}
	t, ok := tx.(pgxTx)
	if !ok {
		return nil, fmt.Errorf("%w: a %T is not a transaction of the pgx driver", idem.ErrInvalidArgument, tx)
	}
	return t.tx, nil
}

// pgxFunc is fn as an idempgx.Func; nil stays nil, for the Store to refuse.
func pgxFunc(fn idemtest.Func) idempgx.Func {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx) (idem.Response, error) {
		return fn(ctx, pgxTx{tx: tx})
	}
}

// txOptions maps database/sql's options, in which the properties ask for
// an isolation level, to pgx's, as pgx's database/sql driver does; a level
// that PostgreSQL does not name is an error, as there.
func txOptions(opts *sql.TxOptions) (pgx.TxOptions, error) {
	var o pgx.TxOptions
	if opts == nil {
		return o, nil
	}
	switch opts.Isolation {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		o.IsoLevel = pgx.ReadUncommitted
	case sql.LevelReadCommitted:
		o.IsoLevel = pgx.ReadCommitted
	case sql.LevelRepeatableRead, sql.LevelSnapshot:
		o.IsoLevel = pgx.RepeatableRead
	case sql.LevelSerializable:
		o.IsoLevel = pgx.Serializable
	default:
		return o, fmt.Errorf("PostgreSQL has no isolation level %v", opts.Isolation)
	}
	if opts.ReadOnly {
		o.AccessMode = pgx.ReadOnly
	}
	return o, nil
}

// ended makes the error of a pgx transaction that has ended match
// sql.ErrTxDone too, as idemtest.Tx asks, so that the suite tells it from a
// failure of the database as it does on database/sql.
func ended(err error) error {
	if errors.Is(err, pgx.ErrTxClosed) && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w (%w)", err, sql.ErrTxDone)
	}
	return err
}

func (t pgxTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, ended(err)
	}
	return tag.RowsAffected(), nil
}

func (t pgxTx) QueryRow(ctx context.Context, query string, args []any, dest ...any) error {
	return ended(t.tx.QueryRow(ctx, query, args...).Scan(dest...))
}

func (t pgxTx) Commit(ctx context.Context) error   { return ended(t.tx.Commit(ctx)) }
func (t pgxTx) Rollback(ctx context.Context) error { return ended(t.tx.Rollback(ctx)) }
