package idemhttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestErrorWriterGetsTheProtocolHeaders writes the problems that ask the
// client to wait, and one that does not, through an error writer, and
// checks that Cache-Control and Retry-After are set before it runs, and
// that the writer is told the delay.
func TestErrorWriterGetsTheProtocolHeaders(t *testing.T) {
	for _, c := range []struct {
		k          kind
		retryAfter string
	}{
		{problemInFlight, "2"},
		{problemConflict, "2"},
		{problemCommitUnknown, "2"},
		{problemKeyReused, ""},
	} {
		t.Run(c.k.slug, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.retryAfter = 1500 * time.Millisecond // rounded up
			var seen http.Header
			var got Problem
			cfg.errorWriter = func(w http.ResponseWriter, _ *http.Request, p Problem) {
				seen, got = w.Header().Clone(), p
				w.WriteHeader(p.Status)
			}
			rec := httptest.NewRecorder()
			cfg.writeProblem(rec, httptest.NewRequest("POST", "/", nil), c.k)
			if seen.Get("Cache-Control") != "no-store" || seen.Get("Retry-After") != c.retryAfter {
				t.Errorf("the writer saw %v, want Cache-Control: no-store and Retry-After %q", seen, c.retryAfter)
			}
			wantDelay := time.Duration(0)
			if c.retryAfter != "" {
				wantDelay = cfg.retryAfter
			}
			if got.RetryAfter != wantDelay || got.Status != c.k.status || got.Slug != c.k.slug {
				t.Errorf("the writer got %+v, want status %d, slug %s, delay %v", got, c.k.status, c.k.slug, wantDelay)
			}
			if rec.Code != c.k.status {
				t.Errorf("status %d, want %d", rec.Code, c.k.status)
			}
		})
	}
}
