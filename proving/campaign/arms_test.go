package campaign

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillInCheckpoint shows the kill-at checkpoint fault of
// docs/reliability.md strike: a service armed with it, on a SQLite file
// whose write-ahead log holds some thousand pages, dies by SIGKILL while
// its checkpoint copies them, and the file it leaves holds every row the
// log did.
func TestKillInCheckpoint(t *testing.T) {
	dsn := "file:" + filepath.Join(t.TempDir(), "checkpoint.db") + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// One connection, held open: the last one to close would checkpoint
	// the log itself.
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	const rows = 1000
	for _, q := range []string{"PRAGMA wal_autocheckpoint = 0", "CREATE TABLE filler (b BLOB NOT NULL)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for range rows {
		if _, err := db.ExecContext(ctx, "INSERT INTO filler (b) VALUES (?)", bytes.Repeat([]byte{1}, 4000)); err != nil {
			t.Fatal(err)
		}
	}

	// This test binary serves, as TestMain says.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{bin: bin, log: testLog{t}, cfg: ServiceConfig{
		Dialect: "sqlite", Family: "sqlite", Driver: "sqlite", DSN: dsn, Table: "campaign_checkpoint",
	}}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(p.base()+"/arm", "application/json", strings.NewReader(`{"kill_at":"`+PointCheckpoint+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatal("the service lived through twenty checkpoints")
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the service ended %v, not by SIGKILL in its checkpoint", p.cmd.ProcessState)
	}

	var n int
	var check string
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM filler").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil {
		t.Fatal(err)
	}
	if n != rows || check != "ok" {
		t.Errorf("after the kill: %d rows, want %d; integrity check %q", n, rows, check)
	}
}
