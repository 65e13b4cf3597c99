package idem_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/proving/dbtest"
)

// busyError is SQLITE_BUSY as the SQLite dialect reads it.
type busyError struct{}

func (busyError) Error() string { return "database is locked" }
func (busyError) Code() int     { return 5 }

func TestObserver(t *testing.T) {
	var (
		mu     sync.Mutex
		events []idem.Event
	)
	var second atomic.Int32 // a second observer sees every event too
	e := setup(t, dbtest.SQLite(""), idem.WithObserver(func(_ context.Context, ev idem.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}), idem.WithObserver(func(context.Context, idem.Event) { second.Add(1) }))
	ctx := context.Background()
	failed := errors.New("no stock")
	attempts := 0
	conflictOnce := func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		if attempts++; attempts == 1 {
			return idem.Response{}, busyError{}
		}
		return e.Effect("k", dbtest.Created)(ctx, tx)
	}
	if _, err := e.Store.DoTx(ctx, e.DB, nil, "k", dbtest.HashA, conflictOnce); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(t, "k", dbtest.HashA, dbtest.MustNotRun(t), false); err != nil {
		t.Fatal(err)
	}
	_, _ = e.Do(t, "other", dbtest.HashA, func(context.Context, *sql.Tx) (idem.Response, error) { return idem.Response{}, failed }, false)

	sum := sha256.Sum256([]byte("k"))
	keyHash := hex.EncodeToString(sum[:8])
	want := []struct {
		outcome  idem.Outcome
		err      error
		attempts int
		keyHash  string
	}{
		{idem.Claimed, nil, 2, keyHash},
		{idem.Replay, nil, 1, keyHash},
		{0, failed, 1, ""},
	}
	if len(events) != len(want) || int(second.Load()) != len(want) {
		t.Fatalf("%d and %d events, want %d: %+v", len(events), second.Load(), len(want), events)
	}
	for i, w := range want {
		ev := events[i]
		if ev.Outcome != w.outcome || !errors.Is(ev.Err, w.err) || (w.err == nil) != (ev.Err == nil) || ev.Attempts != w.attempts {
			t.Errorf("event %d = %+v, want outcome %v, error %v, %d attempts", i, ev, w.outcome, w.err, w.attempts)
		}
		if w.keyHash != "" && ev.KeyHash != w.keyHash {
			t.Errorf("event %d names the key %q, want %q", i, ev.KeyHash, w.keyHash)
		}
		if _, err := hex.DecodeString(ev.KeyHash); err != nil || len(ev.KeyHash) != 16 || ev.Duration <= 0 || ev.ClaimWait <= 0 || ev.ClaimWait > ev.Duration {
			t.Errorf("event %d: key hash %q, claim wait %v, duration %v", i, ev.KeyHash, ev.ClaimWait, ev.Duration)
		}
	}
}

// An answer from the read of LookupAlways ran no transaction and no claim.
func TestObserverLookupFirst(t *testing.T) {
	var events []idem.Event
	e := setup(t, dbtest.SQLite(""), idem.WithLookupFirst(idem.LookupAlways), idem.WithObserver(func(_ context.Context, ev idem.Event) {
		events = append(events, ev)
	}))
	for range 2 {
		if _, err := e.Store.DoTx(context.Background(), e.DB, nil, "k", dbtest.HashA, e.Effect("k", dbtest.Created)); err != nil {
			t.Fatal(err)
		}
	}
	if len(events) != 2 {
		t.Fatalf("%d events, want 2", len(events))
	}
	if ev := events[0]; ev.Outcome != idem.Claimed || ev.Attempts != 1 || ev.ClaimWait <= 0 {
		t.Errorf("claim: %+v, want Claimed, 1 attempt, a claim wait", ev)
	}
	if ev := events[1]; ev.Outcome != idem.Replay || ev.Attempts != 0 || ev.ClaimWait != 0 || ev.Duration <= 0 {
		t.Errorf("replay: %+v, want Replay, 0 attempts, no claim wait, a duration", ev)
	}
}
