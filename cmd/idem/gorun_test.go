package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGoRunLosesExitStatus shows why the docs build the command rather than
// go run it: on a key with no record, the built command ends with status 3,
// and go run of the same command line with 1, the status of any failure,
// printing the command's own on stderr.
func TestGoRunLosesExitStatus(t *testing.T) {
	t.Parallel()
	dsn := filepath.Join(t.TempDir(), "shop.db")
	runBuilt(t, "migrate", "-dsn", dsn).wantCode(t, exitOK)
	runBuilt(t, "inspect", "-dsn", dsn, "-key", "order-1").wantCode(t, exitNotFound)

	cmd := exec.Command("go", "run", ".", "inspect", "-dsn", dsn, "-key", "order-1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("go run . inspect of a key with no record: %v, want it to fail", err)
	}
	if exit.ExitCode() != exitError || !strings.Contains(stderr.String(), "exit status 3") {
		t.Errorf("go run . inspect of a key with no record: exit status %d, stderr %q; want 1, with the command's 3 on stderr", exit.ExitCode(), stderr.String())
	}
}

// TestDocsRunTheBuiltCommand holds README.md, docs/*.md and the command's
// own help to the command as go build or go install makes it: go run of
// it appears only for the demo, whose exit status matters to no script;
// the README's quick start has its two commands, the demo and scripts/test;
// its operations section and docs/operations.md build the command.
func TestDocsRunTheBuiltCommand(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	for _, s := range sources {
		if !strings.HasSuffix(s, "_test.go") {
			files = append(files, s)
		}
	}
	// go run of the command with arguments: the first must be demo.
	goRun := regexp.MustCompile("go run [^\\s`]*cmd/idem(@[^\\s`]*)? +([^\\s`]+)")
	text := map[string]string{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text[name] = string(b)
		for _, m := range goRun.FindAllStringSubmatch(string(b), -1) {
			if m[2] != "demo" {
				t.Errorf("%s: %q: build the command for operator work, and go run only the demo", name, m[0])
			}
		}
	}

	readme := text[filepath.Join(root, "README.md")]
	_, quick, _ := strings.Cut(readme, "\n## Quick start\n")
	_, block, _ := strings.Cut(quick, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var commands []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		c, _, _ := strings.Cut(l, "#")
		commands = append(commands, strings.TrimSpace(c))
	}
	if want := []string{"go run ./cmd/idem demo", "scripts/test"}; !slices.Equal(commands, want) {
		t.Errorf("README's quick start runs %q, want %q", commands, want)
	}

	_, ops, _ := strings.Cut(readme, "\n## Operations\n")
	ops, _, _ = strings.Cut(ops, "\n## ")
	for name, section := range map[string]string{"README's operations": ops, "docs/operations.md": text[filepath.Join(root, "docs", "operations.md")]} {
		if !strings.Contains(section, "\ngo build -o idem ./cmd/idem ") || !strings.Contains(section, "go install github.com/idemgo/idem/cmd/idem@latest") {
			t.Errorf("%s does not show the command built with go build -o idem ./cmd/idem, or go install", name)
		}
	}
}
