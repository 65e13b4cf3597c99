// Package release_test runs scripts/release on a clone of the checkout, as
// docs/releasing.md says it is run.
package release_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clone clones the repository's committed tree (uncommitted changes are
// not in it) into a directory of t's, with a committer of its own.
func clone(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git to clone the checkout with: %v", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to clone", err)
	}
	dir := filepath.Join(t.TempDir(), "idem")
	run(t, "", "git", "clone", "-q", strings.TrimSpace(string(top)), dir)
	run(t, dir, "git", "config", "user.name", "release test")
	run(t, dir, "git", "config", "user.email", "release@test.invalid")
	return dir
}

// run runs name with args in dir and returns its output, failing t if it
// fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, err := release(dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func release(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestReleaseRefuses shows that scripts/release refuses a version that is
// not vX.Y.Z, a work tree with changes and a tag that exists, before it
// changes anything.
func TestReleaseRefuses(t *testing.T) {
	dir := clone(t)
	head := run(t, dir, "git", "rev-parse", "HEAD")
	for _, c := range []struct {
		name, version, want string
		prepare             func()
	}{
		{"a version without its v", "0.2.0", "a version is vMAJOR.MINOR.PATCH", nil},
		{"a tag that exists", "v0.2.0", "tag idempgx/v0.2.0 exists", func() { run(t, dir, "git", "tag", "idempgx/v0.2.0") }},
		{"a work tree with changes", "v0.3.0", "the work tree has changes", func() {
			if err := os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.prepare != nil {
				c.prepare()
			}
			out, err := release(dir, "bash", "scripts/release", c.version)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("scripts/release %s: %v, %q; want a refusal that says %q", c.version, err, out, c.want)
			}
			if got := run(t, dir, "git", "rev-parse", "HEAD"); got != head {
				t.Errorf("HEAD moved from %s to %s", head, got)
			}
		})
	}
}

// TestRelease releases v0.2.0 on a clone: every module then requires idem's
// other modules at v0.2.0, the workspaces serve that version from the
// checkout and keep their comments, one commit holds it, every published
// module has its tag on that commit, the script prints the push with the
// root's tag first, and the workspace still builds. The script runs the
// consumer check at the version itself, which fails it if a tag would not
// serve.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("tidies every module and runs the consumer check (minutes)")
	}
	dir := clone(t)
	out := run(t, dir, "bash", "scripts/release", "v0.2.0")
	tags := []string{"v0.2.0", "idemtest/v0.2.0", "idempgx/v0.2.0", "idemgrpc/v0.2.0", "cmd/idem/v0.2.0", "proving/v0.2.0"}
	if want := "git push origin HEAD " + strings.Join(tags, " "); !strings.Contains(out, want) {
		t.Errorf("the script's output does not say %q:\n%s", want, out)
	}
	head := strings.TrimSpace(run(t, dir, "git", "rev-parse", "HEAD"))
	for _, tag := range tags {
		if got := strings.TrimSpace(run(t, dir, "git", "rev-list", "-n", "1", tag)); got != head {
			t.Errorf("tag %s is on %s, want the release's commit %s", tag, got, head)
		}
	}
	if status := run(t, dir, "git", "status", "--porcelain"); status != "" {
		t.Errorf("the release left changes uncommitted:\n%s", status)
	}
	mods := strings.Fields(run(t, dir, "git", "ls-files", "*go.mod"))
	if len(mods) < 6 {
		t.Fatalf("git lists %d go.mod files, want every module's", len(mods))
	}
	for _, mod := range mods {
		b, err := os.ReadFile(filepath.Join(dir, mod))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && strings.HasPrefix(f[len(f)-2], "github.com/idemgo/idem") && f[len(f)-1] != "v0.2.0" {
				t.Errorf("%s: %q, want v0.2.0", mod, strings.TrimSpace(line))
			}
		}
	}
	work, err := os.ReadFile(filepath.Join(dir, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(work), "github.com/idemgo/idem/proving v0.2.0 => ./proving") ||
		strings.Contains(string(work), "v0.1.0") || !strings.Contains(string(work), "// Before the first tag") {
		t.Errorf("go.work after the release:\n%s", work)
	}
	run(t, dir, "go", "build", "./...")
	run(t, filepath.Join(dir, "proving"), "go", "vet", "./dbtest")
}
