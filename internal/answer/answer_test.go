package answer_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/internal/answer"
)

// sentinels returns the message of each exported error variable of
// package idem (var ErrX = errors.New("...")), by its name, read from the
// package's source, so that a sentinel added there is found here without
// anyone remembering to list it.
func sentinels(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("../..", name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name == "idem" {
			files = append(files, f)
		}
	}
	found := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() || !strings.HasPrefix(name.Name, "Err") || i >= len(vs.Values) {
						continue
					}
					call, ok := vs.Values[i].(*ast.CallExpr)
					if !ok || len(call.Args) != 1 || fmt.Sprint(call.Fun) != "&{errors New}" {
						t.Errorf("%s is not declared as errors.New of a message", name.Name)
						continue
					}
					lit, ok := call.Args[0].(*ast.BasicLit)
					if !ok {
						t.Errorf("%s: its message is not a literal", name.Name)
						continue
					}
					msg, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					found[name.Name] = msg
				}
			}
		}
	}
	if len(found) < 10 {
		t.Fatalf("found only %d sentinels in package idem: %v", len(found), found)
	}
	return found
}

// TestEverySentinelHasItsPlace holds each Rules to package idem's
// sentinels: every one of them is in Match or in Rest, once, and nothing
// else is, so that a sentinel added to package idem fails here until both
// paths say how they answer it.
func TestEverySentinelHasItsPlace(t *testing.T) {
	want := sentinels(t)
	for name, rules := range map[string]*answer.Rules{"DoTx": &answer.DoTx, "Run": &answer.Run} {
		t.Run(name, func(t *testing.T) {
			placed := map[string]int{} // by message
			for _, r := range rules.Match {
				placed[r.Err.Error()]++
			}
			for _, err := range rules.Rest {
				placed[err.Error()]++
			}
			for sentinel, msg := range want {
				if placed[msg] != 1 {
					t.Errorf("idem.%s is placed %d times, want once: in Match, or in Rest for the default", sentinel, placed[msg])
				}
				delete(placed, msg)
			}
			for msg, n := range placed {
				t.Errorf("%q (%d times) is not a sentinel of package idem", msg, n)
			}
		})
	}
}

// TestEveryOutcomeHasItsAnswer holds Outcomes to the outcomes that package
// idem defines: each has an entry, and nothing else has.
func TestEveryOutcomeHasItsAnswer(t *testing.T) {
	defined := map[idem.Outcome]bool{}
	for o := idem.Outcome(1); !strings.HasPrefix(o.String(), "Outcome("); o++ {
		defined[o] = true
		if _, ok := answer.Outcomes[o]; !ok {
			t.Errorf("the outcome %v has no answer", o)
		}
	}
	for o := range answer.Outcomes {
		if !defined[o] {
			t.Errorf("an answer for %v, which package idem does not define", o)
		}
	}
	for o, want := range map[idem.Outcome]struct {
		a  answer.Answer
		ok bool
	}{
		idem.Claimed:  {answer.Answer{}, false},
		idem.Replay:   {answer.Answer{}, false},
		idem.Mismatch: {answer.KeyReused, true},
		idem.InFlight: {answer.InFlight, true},
		0:             {answer.InFlight, true},
		99:            {answer.InFlight, true},
	} {
		if a, ok := answer.Outcome(o); a != want.a || ok != want.ok {
			t.Errorf("Outcome(%v) = %v, %v; want %v, %v", o, a, ok, want.a, want.ok)
		}
	}
}

// TestRulesAnswer checks what each Rules answers: a sentinel of Match,
// wrapped, gets its rule's answer; one of Rest, and an error of no
// sentinel, the default. It pins the answers that the adapters have always
// given, and the order in which an error that matches two sentinels is
// answered.
func TestRulesAnswer(t *testing.T) {
	plain := errors.New("the database is gone")
	for _, c := range []struct {
		rules *answer.Rules
		err   error
		want  answer.Answer
	}{
		{&answer.DoTx, idem.ErrRetry, answer.Conflict},
		{&answer.DoTx, idem.ErrCommitUnknown, answer.OutcomeUnknown},
		{&answer.DoTx, idem.ErrResponseTooLarge, answer.ResponseTooLarge},
		{&answer.DoTx, idem.ErrCorruptRecord, answer.RecordDamaged},
		{&answer.DoTx, idem.ErrInvalidArgument, answer.InternalError},
		{&answer.DoTx, idem.ErrTxEnded, answer.InternalError},
		{&answer.DoTx, plain, answer.InternalError},
		{&answer.DoTx, fmt.Errorf("%w: commit: lost; lookup: %w", idem.ErrCommitUnknown, idem.ErrRetry), answer.Conflict},

		{&answer.Run, idem.ErrLeaseLost, answer.InFlight},
		{&answer.Run, idem.ErrInvalidArgument, answer.InternalError},
		{&answer.Run, idem.ErrNoSteps, answer.InternalError},
		{&answer.Run, idem.ErrRetry, answer.Unfinished},
		{&answer.Run, idem.ErrCommitUnknown, answer.OutcomeUnknown},
		{&answer.Run, idem.ErrResponseTooLarge, answer.ResponseTooLarge},
		{&answer.Run, idem.ErrCorruptRecord, answer.RecordDamaged},
		{&answer.Run, idem.ErrInvalidKey, answer.Unfinished},
		{&answer.Run, plain, answer.Unfinished},
		{&answer.Run, fmt.Errorf("%w: commit: lost; lookup: %w", idem.ErrCommitUnknown, idem.ErrRetry), answer.Unfinished},
	} {
		name := "DoTx"
		if c.rules == &answer.Run {
			name = "Run"
		}
		if got := c.rules.Of(fmt.Errorf("wrapped: %w", c.err)); got != c.want {
			t.Errorf("%s.Of(%v) = %s, want %s", name, c.err, got.Slug, c.want.Slug)
		}
	}
	for name, rules := range map[string]*answer.Rules{"DoTx": &answer.DoTx, "Run": &answer.Run} {
		for _, err := range rules.Rest {
			if got := rules.Of(err); got != rules.Default {
				t.Errorf("%s.Of(%v) = %s, want the default %s", name, err, got.Slug, rules.Default.Slug)
			}
		}
	}
}

// TestAnswers holds the answers together: each is in All once, with a slug
// and a reason of its own; an answer that asks for a retry is Unavailable,
// the code that gRPC's retry policies retry, and 409 or 503; one that does
// not is not Unavailable, so that no policy retries it, and is a 4xx or a
// 5xx. Every answer of the rules and the outcomes is in All.
func TestAnswers(t *testing.T) {
	slugs, reasons := map[string]bool{}, map[string]bool{}
	in := map[answer.Answer]bool{}
	for _, a := range answer.All {
		if a.Slug == "" || a.Reason == "" || slugs[a.Slug] || reasons[a.Reason] {
			t.Errorf("%+v: want a slug and a reason of its own", a)
		}
		slugs[a.Slug], reasons[a.Reason], in[a] = true, true, true
		switch {
		case a.Retry && (a.Code != answer.Unavailable || a.Status != http.StatusConflict && a.Status != http.StatusServiceUnavailable):
			t.Errorf("%s asks for a retry as %d, code %d; want 409 or 503, and Unavailable", a.Slug, a.Status, a.Code)
		case !a.Retry && (a.Code == answer.Unavailable || a.Status < 400 || a.Status > 599):
			t.Errorf("%s asks for no retry as %d, code %d; want a 4xx or 5xx, and not Unavailable", a.Slug, a.Status, a.Code)
		}
	}
	for _, rules := range []*answer.Rules{&answer.DoTx, &answer.Run} {
		for _, r := range rules.Match {
			if !in[r.Answer] {
				t.Errorf("the answer to %v, %+v, is not in All", r.Err, r.Answer)
			}
		}
		if !in[rules.Default] {
			t.Errorf("the default %+v is not in All", rules.Default)
		}
	}
	for o, a := range answer.Outcomes {
		if a != (answer.Answer{}) && !in[a] {
			t.Errorf("the answer to %v, %+v, is not in All", o, a)
		}
	}
}
