package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"time"
)

// Commit modes, for -commits:
//
//   - fast is the server as it runs: as scripts/test starts them, PostgreSQL
//     with fsync, synchronous_commit and full_page_writes off, MariaDB and
//     MySQL with innodb_flush_log_at_trx_commit=2; SQLite in WAL mode with
//     synchronous=NORMAL.
//   - durable makes every commit wait for its flush to disk, for the
//     measurement only: on PostgreSQL ALTER SYSTEM turns the three settings
//     on, and pg_reload_conf applies them; on MariaDB and MySQL SET GLOBAL
//     innodb_flush_log_at_trx_commit = 1, and sync_binlog = 1 when the
//     binary log is on; SQLite opens with synchronous=FULL.
//
// The server's own values are read first, and put back when the comparison
// ends, fails or is interrupted. A run that is killed (SIGKILL) leaves the
// server durable: restore it by hand as restore does (commits.go prints the
// statements when it switches).
const (
	commitFast    = "fast"
	commitDurable = "durable"
)

var commitModes = []string{commitFast, commitDurable}

// commitSwitch puts one database's server in a commit mode.
type commitSwitch interface {
	// set puts the server in mode, checks that the server took it, and
	// returns the values it reads back, to print.
	set(ctx context.Context, mode string) (string, error)
	// restore puts back the values the server had before the first set to
	// durable, and closes the switch.
	restore(ctx context.Context) error
}

// restoreTimeout bounds the restore of a server's commit settings, which
// runs on a context of its own so that an interrupted run still restores.
const restoreTimeout = 20 * time.Second

// settleTime is how long a server is given, after its sessions show a new
// setting, for its background processes (PostgreSQL's WAL writer and
// checkpointer) to take it too.
const settleTime = 200 * time.Millisecond

// sqliteCommits is the switch of SQLite, whose commit mode is in the DSN
// (see kind.database): it only describes it.
type sqliteCommits struct{}

func newSQLiteCommits(context.Context, string, string) (commitSwitch, error) {
	return sqliteCommits{}, nil
}

func (sqliteCommits) set(_ context.Context, mode string) (string, error) {
	if mode == commitDurable {
		return "journal_mode=WAL synchronous=FULL", nil
	}
	return "journal_mode=WAL synchronous=NORMAL", nil
}

func (sqliteCommits) restore(context.Context) error { return nil }

// tidbCommits is the switch of TiDB, whose commits idembench leaves as
// they are: it runs the fast mode only.
type tidbCommits struct{}

func newTiDBCommits(context.Context, string, string) (commitSwitch, error) {
	return tidbCommits{}, nil
}

func (tidbCommits) set(_ context.Context, mode string) (string, error) {
	if mode == commitDurable {
		return "", errors.New("TiDB's commits are not switched: run it with -commits fast")
	}
	return "as the server runs", nil
}

func (tidbCommits) restore(context.Context) error { return nil }

// pgCommitParams are the PostgreSQL settings that durable turns on.
var pgCommitParams = []string{"fsync", "synchronous_commit", "full_page_writes"}

// postgresCommits switches PostgreSQL with ALTER SYSTEM, which writes
// postgresql.auto.conf, whose values override postgresql.conf's.
type postgresCommits struct {
	// db opens a connection for every statement (no idle connections), so
	// that each SHOW comes from a new session, which starts with the
	// configuration the server has loaded.
	db *sql.DB
	// before are the values SHOW gave at the start.
	before map[string]string
	// auto are the values postgresql.auto.conf held at the start, which
	// restore sets again; read at the first switch to durable.
	auto    map[string]string
	changed bool
}

func newPostgresCommits(ctx context.Context, driver, dsn string) (commitSwitch, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(0)
	s := &postgresCommits{db: db}
	if s.before, err = s.show(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *postgresCommits) show(ctx context.Context) (map[string]string, error) {
	vals := map[string]string{}
	for _, name := range pgCommitParams {
		var v string
		if err := s.db.QueryRowContext(ctx, "SHOW "+name).Scan(&v); err != nil {
			return nil, fmt.Errorf("SHOW %s: %w", name, err)
		}
		vals[name] = v
	}
	return vals, nil
}

func (s *postgresCommits) describe(vals map[string]string) string {
	var parts []string
	for _, name := range pgCommitParams {
		parts = append(parts, name+"="+vals[name])
	}
	return strings.Join(parts, " ")
}

// apply runs ALTER SYSTEM for each setting (value "" resets it), reloads
// the configuration and waits until new sessions show want.
func (s *postgresCommits) apply(ctx context.Context, values, want map[string]string) error {
	for _, name := range pgCommitParams {
		q := "ALTER SYSTEM RESET " + name
		if v := values[name]; v != "" {
			q = "ALTER SYSTEM SET " + name + " = '" + strings.ReplaceAll(v, "'", "''") + "'"
		}
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	if _, err := s.db.ExecContext(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("pg_reload_conf: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.show(ctx)
		if err != nil {
			return err
		}
		if maps.Equal(got, want) {
			sleep(ctx, settleTime)
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after the reload the server shows %s, want %s", s.describe(got), s.describe(want))
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

func (s *postgresCommits) set(ctx context.Context, mode string) (string, error) {
	if mode != commitDurable {
		if err := s.undo(ctx); err != nil {
			return "", err
		}
		got, err := s.show(ctx)
		return s.describe(got), err
	}
	if s.auto == nil {
		// What ALTER SYSTEM had set before, to set again at the end
		// (pg_file_settings needs a superuser or pg_read_all_settings).
		rows, err := s.db.QueryContext(ctx, `SELECT name, setting FROM pg_file_settings
WHERE sourcefile LIKE '%postgresql.auto.conf' AND name IN ('fsync', 'synchronous_commit', 'full_page_writes') ORDER BY seqno`)
		if err != nil {
			return "", fmt.Errorf("read postgresql.auto.conf's settings: %w", err)
		}
		auto := map[string]string{}
		for rows.Next() {
			var name, v string
			if err := rows.Scan(&name, &v); err != nil {
				rows.Close()
				return "", err
			}
			auto[name] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", err
		}
		s.auto = auto
	}
	on := map[string]string{}
	for _, name := range pgCommitParams {
		on[name] = "on"
	}
	if !s.changed {
		fmt.Fprintf(os.Stderr, "idembench: postgres: ALTER SYSTEM SET %s = on for durable commits; should the run be killed, undo it with %s and SELECT pg_reload_conf()\n",
			strings.Join(pgCommitParams, ", "), s.undoText())
	}
	s.changed = true
	if err := s.apply(ctx, on, on); err != nil {
		return "", err
	}
	got, err := s.show(ctx)
	return s.describe(got), err
}

func (s *postgresCommits) undoText() string {
	var parts []string
	for _, name := range pgCommitParams {
		if v, ok := s.auto[name]; ok {
			parts = append(parts, "ALTER SYSTEM SET "+name+" = '"+v+"'")
		} else {
			parts = append(parts, "ALTER SYSTEM RESET "+name)
		}
	}
	return strings.Join(parts, "; ")
}

// undo puts back the values of the start, if set changed them.
func (s *postgresCommits) undo(ctx context.Context) error {
	if !s.changed {
		return nil
	}
	if err := s.apply(ctx, s.auto, s.before); err != nil {
		return err
	}
	s.changed = false
	return nil
}

func (s *postgresCommits) restore(ctx context.Context) error {
	defer s.db.Close()
	return s.undo(ctx)
}

// innodbCommits switches MariaDB and MySQL with SET GLOBAL.
type innodbCommits struct {
	db *sql.DB
	// flush and syncBinlog are the values at the start; logBin is whether
	// the binary log is on.
	flush, syncBinlog int
	logBin            bool
	changed           bool
}

func newInnoDBCommits(ctx context.Context, driver, dsn string) (commitSwitch, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	s := &innodbCommits{db: db}
	if s.flush, s.logBin, s.syncBinlog, err = s.read(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *innodbCommits) read(ctx context.Context) (flush int, logBin bool, syncBinlog int, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.log_bin, @@GLOBAL.sync_binlog").
		Scan(&flush, &logBin, &syncBinlog)
	return flush, logBin, syncBinlog, err
}

func (s *innodbCommits) describe(ctx context.Context) (string, error) {
	flush, logBin, syncBinlog, err := s.read(ctx)
	if err != nil {
		return "", err
	}
	if !logBin {
		return fmt.Sprintf("innodb_flush_log_at_trx_commit=%d, no binary log", flush), nil
	}
	return fmt.Sprintf("innodb_flush_log_at_trx_commit=%d sync_binlog=%d", flush, syncBinlog), nil
}

// apply sets the two variables (sync_binlog only with a binary log) and
// checks that the server shows them.
func (s *innodbCommits) apply(ctx context.Context, flush, syncBinlog int) error {
	q := fmt.Sprintf("SET GLOBAL innodb_flush_log_at_trx_commit = %d", flush)
	if s.logBin {
		q += fmt.Sprintf(", GLOBAL sync_binlog = %d", syncBinlog)
	}
	if _, err := s.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	gotFlush, _, gotSync, err := s.read(ctx)
	if err != nil {
		return err
	}
	if gotFlush != flush || s.logBin && gotSync != syncBinlog {
		return fmt.Errorf("after %s the server shows innodb_flush_log_at_trx_commit=%d sync_binlog=%d", q, gotFlush, gotSync)
	}
	return nil
}

func (s *innodbCommits) set(ctx context.Context, mode string) (string, error) {
	if mode == commitDurable {
		if !s.changed {
			undo := fmt.Sprintf("SET GLOBAL innodb_flush_log_at_trx_commit = %d", s.flush)
			if s.logBin {
				undo += fmt.Sprintf(", GLOBAL sync_binlog = %d", s.syncBinlog)
			}
			fmt.Fprintf(os.Stderr, "idembench: SET GLOBAL innodb_flush_log_at_trx_commit = 1 for durable commits; should the run be killed, undo it with %s\n", undo)
		}
		s.changed = true
		if err := s.apply(ctx, 1, 1); err != nil {
			return "", err
		}
	} else if err := s.undo(ctx); err != nil {
		return "", err
	}
	return s.describe(ctx)
}

func (s *innodbCommits) undo(ctx context.Context) error {
	if !s.changed {
		return nil
	}
	if err := s.apply(ctx, s.flush, s.syncBinlog); err != nil {
		return err
	}
	s.changed = false
	return nil
}

func (s *innodbCommits) restore(ctx context.Context) error {
	defer s.db.Close()
	return s.undo(ctx)
}
