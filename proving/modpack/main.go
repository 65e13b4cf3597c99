// Command modpack packs modules of this repository into a directory laid
// out as a module proxy serves them (GOPROXY=file://DIR), each at one
// version, as its tag would serve it: the module's go.mod, and a zip of the
// files that git tracks in it, without those of the modules nested in it
// and of vendor directories. proving/check-consumer builds consumers
// against it, to show that the modules can be fetched as users fetch them.
//
//	go run ./proving/modpack -version v0.1.0 -out DIR . idemgrpc
package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	version := flag.String("version", "", "the version to pack the modules at, such as v0.1.0")
	out := flag.String("out", "", "the directory of the file-system proxy")
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: modpack -version vX.Y.Z -out DIR MODULE_DIR...")
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		if err := pack(dir, *version, *out); err != nil {
			fmt.Fprintln(os.Stderr, "modpack:", err)
			os.Exit(1)
		}
	}
}

// pack writes the module in dir at version into the proxy directory out.
func pack(dir, version, out string) error {
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	modPath := modulePath(mod)
	if modPath == "" {
		return fmt.Errorf("%s/go.mod names no module", dir)
	}
	if strings.ToLower(modPath) != modPath {
		return fmt.Errorf("module %s: upper-case paths need the proxy's escaping, which modpack does not do", modPath)
	}
	at := filepath.Join(out, filepath.FromSlash(modPath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	var zipped bytes.Buffer
	if err := zipModule(&zipped, dir, modPath+"@"+version); err != nil {
		return err
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	for name, data := range map[string][]byte{
		version + ".mod":  mod,
		version + ".info": []byte(info),
		version + ".zip":  zipped.Bytes(),
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// modulePath reads the module path from the text of a go.mod file.
func modulePath(mod []byte) string {
	s := bufio.NewScanner(bytes.NewReader(mod))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// zipModule writes the files of the module in dir that git tracks to w,
// each under prefix, as the go command expects a module's zip and as a tag
// would serve them: the files of nested modules (directories with a go.mod
// of their own) and vendor directories left out.
func zipModule(w io.Writer, dir, prefix string) error {
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--", ".").Output()
	if err != nil {
		return fmt.Errorf("git ls-files in %s: %w", dir, err)
	}
	z := zip.NewWriter(w)
	nested := map[string]bool{} // directories, relative to dir, by whether they are a module of their own
	for _, rel := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rel == "" || inNestedModule(dir, rel, nested) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return err
		}
		f, err := z.Create(path.Join(prefix, rel))
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
	}
	return z.Close()
}

// inNestedModule reports whether the file rel lies in a vendor directory
// or in a directory below dir that has a go.mod of its own.
func inNestedModule(dir, rel string, nested map[string]bool) bool {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if path.Base(d) == "vendor" {
			return true
		}
		is, ok := nested[d]
		if !ok {
			_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(d), "go.mod"))
			is = err == nil
			nested[d] = is
		}
		if is {
			return true
		}
	}
	return false
}
