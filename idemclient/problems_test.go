package idemclient_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemclient"
	"github.com/idemgo/idem/idemhttp"
)

// TestRetriesWhatIdemhttpAsksToRetry keeps the client in step with the
// server: the default problem type base is idemhttp's, and, for every
// problem of docs/openapi/idempotency.json (which idemhttp's
// TestOpenAPIFragment keeps in step with its problem kinds), the client
// retries the problem exactly when its response carries Retry-After, which
// idemhttp sends with the problems that the same request may get past.
func TestRetriesWhatIdemhttpAsksToRetry(t *testing.T) {
	if idemclient.DefaultProblemTypeBase != idemhttp.DefaultProblemTypeBase {
		t.Errorf("DefaultProblemTypeBase %q, idemhttp's %q", idemclient.DefaultProblemTypeBase, idemhttp.DefaultProblemTypeBase)
	}
	b, err := os.ReadFile(filepath.Join("..", "docs", "openapi", "idempotency.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Responses map[string]struct {
				Headers map[string]any
				Content map[string]struct {
					Schema struct {
						Ref   string `json:"$ref"`
						OneOf []struct {
							Ref string `json:"$ref"`
						}
					}
				}
			}
			Schemas map[string]struct {
				Properties struct {
					Type   struct{ Const string }
					Status struct{ Const int }
				}
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, resp := range doc.Components.Responses {
		_, retry := resp.Headers["Retry-After"]
		schema := resp.Content["application/problem+json"].Schema
		refs := []string{schema.Ref}
		for _, one := range schema.OneOf {
			refs = append(refs, one.Ref)
		}
		for _, ref := range refs {
			p, ok := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
			if ref == "" || !ok || p.Properties.Type.Const == "" {
				continue
			}
			n++
			typ, status := p.Properties.Type.Const, p.Properties.Status.Const
			t.Run(strings.TrimPrefix(typ, idemhttp.DefaultProblemTypeBase), func(t *testing.T) {
				var seen attempts
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if seen.record(r) == 1 {
						w.Header().Set("Content-Type", "application/problem+json")
						if retry {
							w.Header().Set("Retry-After", "0")
						}
						w.WriteHeader(status)
						fmt.Fprintf(w, `{"type":%q,"status":%d}`, typ, status)
						return
					}
					w.WriteHeader(http.StatusCreated)
				}))
				defer srv.Close()
				resp, err := fast(t, idemclient.WithMaxAttempts(2)).Do(post(t, srv.URL, "{}"))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := resp.Attempts == 2; got != retry {
					t.Errorf("%s (%d, in %s): retried %v, want %v, as its Retry-After says", typ, status, name, got, retry)
				}
			})
		}
	}
	if n < 15 {
		t.Fatalf("found %d problems in the fragment, want idemhttp's", n)
	}
}
