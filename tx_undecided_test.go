package idem

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgo/idem/internal/codec"
)

// TestAnswerUndecided shows which answers of DoTx's transactions the read
// after them replaces: InFlight and ErrRetry, when the read finds a live,
// finished record, which answers Replay, Mismatch for another hash, or
// Claimed when it carries the token of an earlier attempt whose commit
// landed late. Other records, a failed read, and the other answers leave
// the transactions' answer; those other answers send no read at all.
func TestAnswerUndecided(t *testing.T) {
	s, err := New(SQLite())
	if err != nil {
		t.Fatal(err)
	}
	key, hash, other := []byte("k"), []byte("hash"), []byte("other")
	now := time.Now().UnixMicro()
	finished := func(token, expiresAt int64) *record {
		header := codec.EncodeHeader(nil)
		body := []byte("done")
		sum := codec.Checksum(key, hash, 201, header, body)
		return &record{requestHash: hash, finished: true, status: 201, header: header, body: body, checksum: sum[:],
			createdAt: now - 1, expiresAt: expiresAt, token: token}
	}
	live := now + time.Hour.Microseconds()
	unfinished := &record{requestHash: hash, createdAt: now - 1, expiresAt: live, token: 1}
	inFlight := Result{Outcome: InFlight}
	conflict := fmt.Errorf("idem: begin: %w", ErrRetry)
	other500 := errors.New("the database is down")
	late := []int64{9}

	for _, c := range []struct {
		name    string
		res     Result
		err     error
		hash    []byte
		rec     *record
		readErr error
		reads   bool
		want    Outcome
		wantErr error
	}{
		{"InFlight, finished", inFlight, nil, hash, finished(1, live), nil, true, Replay, nil},
		{"InFlight, finished, another hash", inFlight, nil, other, finished(1, live), nil, true, Mismatch, nil},
		{"ErrRetry, finished", Result{}, conflict, hash, finished(1, live), nil, true, Replay, nil},
		{"InFlight, finished by an earlier attempt", inFlight, nil, hash, finished(9, live), nil, true, Claimed, nil},
		{"ErrRetry, finished by an earlier attempt", Result{}, conflict, hash, finished(9, live), nil, true, Claimed, nil},
		{"InFlight, no record", inFlight, nil, hash, nil, nil, true, InFlight, nil},
		{"InFlight, unfinished", inFlight, nil, hash, unfinished, nil, true, InFlight, nil},
		{"InFlight, finished and expired", inFlight, nil, hash, finished(1, now-1), nil, true, InFlight, nil},
		{"InFlight, the read fails", inFlight, nil, hash, nil, other500, true, InFlight, nil},
		{"ErrRetry, no record", Result{}, conflict, hash, nil, nil, true, 0, ErrRetry},
		{"Claimed", Result{Outcome: Claimed}, nil, hash, finished(1, live), nil, false, Claimed, nil},
		{"Replay", Result{Outcome: Replay}, nil, hash, finished(1, live), nil, false, Replay, nil},
		{"another error", Result{}, other500, hash, finished(1, live), nil, false, 0, other500},
	} {
		t.Run(c.name, func(t *testing.T) {
			reads := 0
			find := func(context.Context, []byte, any) (*record, error) {
				reads++
				return c.rec, c.readErr
			}
			res, err := s.answerUndecided(context.Background(), find, string(key), nil, c.hash, c.res, c.err, late)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Errorf("error %v, want %v", err, c.wantErr)
				}
			} else if err != nil || res.Outcome != c.want {
				t.Errorf("answered %v, %v; want %v", res.Outcome, err, c.want)
			}
			if res.Outcome == Replay && c.res.Outcome != Replay && string(res.Response.Body) != "done" {
				t.Errorf("replayed body %q, want the record's", res.Response.Body)
			}
			if want := map[bool]int{true: 1, false: 0}[c.reads]; reads != want {
				t.Errorf("read %d times, want %d", reads, want)
			}
		})
	}
}
