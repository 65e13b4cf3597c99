package idem_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes is the largest file the repository keeps outside a
// testdata directory.
const maxTrackedBytes = 1 << 20

// TestTreeHasNoBuildOutputs fails when a file that git tracks is an
// executable binary, by its magic number, or larger than 1 MB outside
// testdata: build outputs belong in .gitignore, not in the tree.
func TestTreeHasNoBuildOutputs(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z", "--full-name", ":/").Output()
	if err != nil {
		t.Skipf("not a git checkout, or no git (%v): the tree's files cannot be listed", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSpace(string(top))
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) < 10 {
		t.Fatalf("git lists %d files, want the whole tree", len(files))
	}
	for _, name := range files {
		path := filepath.Join(root, name)
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if info.Size() > maxTrackedBytes && !inTestdata(name) {
			t.Errorf("%s: %d bytes, more than %d outside testdata", name, info.Size(), maxTrackedBytes)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		if kind := executable(head[:n]); kind != "" {
			t.Errorf("%s is a compiled %s binary: remove it and keep it out with .gitignore", name, kind)
		}
	}
}

// TestExecutableMagic shows that executable knows the binaries it looks
// for, and takes no text for one.
func TestExecutableMagic(t *testing.T) {
	be := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	for _, c := range []struct {
		head []byte
		want string
	}{
		{[]byte("\x7fELF"), "ELF"},
		{be(0xfeedfacf), "Mach-O"},
		{be(0xcffaedfe), "Mach-O"},
		{be(0xfeedface), "Mach-O"},
		{be(0xcafebabe), "Mach-O"},
		{[]byte("MZ\x90\x00"), "PE"},
		{[]byte("pack"), ""},
		{[]byte("# id"), ""},
		{nil, ""},
	} {
		if got := executable(c.head); got != c.want {
			t.Errorf("executable(%q) = %q, want %q", c.head, got, c.want)
		}
	}
}

// executable names the kind of executable whose first bytes are head, or
// returns "".
func executable(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "ELF"
	case bytes.HasPrefix(head, []byte("MZ")):
		return "PE"
	case len(head) >= 4:
		switch binary.BigEndian.Uint32(head) {
		case 0xfeedface, 0xfeedfacf, 0xcefaedfe, 0xcffaedfe, 0xcafebabe:
			return "Mach-O"
		}
	}
	return ""
}

func inTestdata(name string) bool {
	return strings.HasPrefix(name, "testdata/") || strings.Contains(name, "/testdata/")
}
