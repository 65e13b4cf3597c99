package slogobserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/ecosystem/internal/scenario"
	"github.com/idemgo/idem/examples/ecosystem/internal/testdb"
	"github.com/idemgo/idem/examples/ecosystem/observe/slogobserver"
)

func TestRecords(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db := testdb.OpenT(t)
	scenario.Run(t, db, testdb.StoreT(t, idem.WithObserver(slogobserver.New(logger))))

	type record struct {
		Level     string  `json:"level"`
		Msg       string  `json:"msg"`
		Outcome   string  `json:"outcome"`
		Error     *string `json:"error"`
		ErrorType string  `json:"error_type"`
		KeyHash   string  `json:"key_hash"`
		Scope     string  `json:"scope"`
		ClaimWait *int64  `json:"claim_wait"` // nanoseconds, as the JSON handler writes durations
		Duration  *int64  `json:"duration"`
		Attempts  int     `json:"attempts"`
	}
	var records []record
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		line := sc.Text()
		for _, c := range scenario.Calls {
			if strings.Contains(line, c.Key) {
				t.Errorf("a record holds the key %q: %s", c.Key, line)
			}
		}
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		records = append(records, r)
	}
	if len(records) != len(scenario.Calls) {
		t.Fatalf("%d records, want one per call (%d)", len(records), len(scenario.Calls))
	}

	wantLevel := map[string]string{"claimed": "DEBUG", "replay": "INFO", "mismatch": "WARN", "error": "ERROR"}
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	hashes := map[string]string{} // key hash -> key
	for i, c := range scenario.Calls {
		r := records[i]
		switch {
		case r.Msg != slogobserver.Message:
			t.Errorf("%s: msg %q", c.Name, r.Msg)
		case r.Outcome != c.Outcome, r.Level != wantLevel[c.Outcome]:
			t.Errorf("%s: %s at %s, want %s at %s", c.Name, r.Outcome, r.Level, c.Outcome, wantLevel[c.Outcome])
		case r.ErrorType != c.ErrorType, (r.Error != nil) != (c.ErrorType != ""):
			t.Errorf("%s: error %v of type %q, want type %q", c.Name, r.Error, r.ErrorType, c.ErrorType)
		case r.Attempts != c.Attempts:
			t.Errorf("%s: %d attempts, want %d", c.Name, r.Attempts, c.Attempts)
		case r.ClaimWait == nil || r.Duration == nil || *r.ClaimWait < 0 || *r.Duration <= 0 || *r.ClaimWait > *r.Duration:
			t.Errorf("%s: claim_wait %v, duration %v", c.Name, r.ClaimWait, r.Duration)
		case !hex16.MatchString(r.KeyHash):
			t.Errorf("%s: key_hash %q", c.Name, r.KeyHash)
		case r.Scope != scenario.Scope:
			t.Errorf("%s: scope %q, want %q", c.Name, r.Scope, scenario.Scope)
		}
		if key, ok := hashes[r.KeyHash]; ok && key != c.Key {
			t.Errorf("keys %q and %q share the hash %s", key, c.Key, r.KeyHash)
		}
		hashes[r.KeyHash] = c.Key
	}
	if records[0].KeyHash != records[1].KeyHash {
		t.Errorf("one key, two hashes: %s, %s", records[0].KeyHash, records[1].KeyHash)
	}
}

// TestLevelFilter checks that a logger at Info keeps the claims out.
func TestLevelFilter(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	db := testdb.OpenT(t)
	scenario.Run(t, db, testdb.StoreT(t, idem.WithObserver(slogobserver.New(logger))))
	if got, want := strings.Count(buf.String(), "\n"), len(scenario.Calls)-1; got != want {
		t.Errorf("%d records at Info and above, want %d:\n%s", got, want, buf.String())
	}
	if strings.Contains(buf.String(), `"outcome":"claimed"`) {
		t.Errorf("a claim was logged at Info:\n%s", buf.String())
	}
}
