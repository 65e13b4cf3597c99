package campaign

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Mutation is a known bug, put into a copy of one of the library's files
// when the services are built, to show that the campaign finds it. The
// published packages hold no trace of it: the build swaps the file for its
// mutated copy with go build's -overlay, so that no flag, variable or
// build tag of theirs can switch it on.
type Mutation struct {
	Name string
	What string
	// File is the library's file, from the root of its module; Old is
	// text it holds once, which New replaces.
	File     string
	Old, New string
	// Invariant is the invariant that catches the bug.
	Invariant int
	// ServerKills says that the bug shows where the campaign kills the
	// database server (Target.Control), and only there.
	ServerKills bool
	// Faults, when set, are the faults that its campaigns cause, by kind
	// and point, instead of the usual mix: those under which it shows.
	Faults []Fault
}

// Mutations lists the known bugs that the campaign must find.
var Mutations = []Mutation{
	{
		Name: "claim-skips-fingerprint", Invariant: 3,
		What: "a claim that finds a record answers from it whatever the request hash",
		File: "do_claim.go",
		Old:  "case requestHash != nil && !bytes.Equal(rec.requestHash, requestHash):",
		New:  "case false && requestHash != nil && !bytes.Equal(rec.requestHash, requestHash):",
	},
	{
		Name: "callkey-without-incarnation", Invariant: 5,
		What: "a Call step's call key made of the key and the step alone, as before incarnations",
		File: "identity.go",
		Old:  "if id.Incarnation == 0 {",
		New:  "if true || id.Incarnation == 0 {",
	},
	{
		Name: "purge-ignores-expiry", Invariant: 4,
		What: "Purge deletes the records that expire within a retention window from now, live ones included",
		File: "operator_purge.go",
		Old:  "v := &values{now: s.clock().UnixMicro(), limit: int64(batch)}",
		New:  "v := &values{now: s.clock().UnixMicro() + s.retention, limit: int64(batch)}",
	},
	{
		Name: "operators-ignore-lease", Invariant: 6,
		What: "Settle, the releases and Forget act on a multi-step request whose runner's lease still runs",
		File: "operator_settle.go",
		Old:  "if p != nil && p.leaseUntil > p.now {",
		New:  "if false && p != nil && p.leaseUntil > p.now {",
	},
	{
		Name: "forget-unfinished", Invariant: 6,
		What: "Forget deletes an unfinished record that no one holds",
		File: "operator_settle.go",
		Old:  "if !rec.finished && finished {",
		New:  "if false && !rec.finished && finished {",
	},
	{
		Name: "release-past-phases", Invariant: 6,
		What: "ReleaseWithoutEffect deletes a multi-step request that has committed phases",
		File: "operator_settle.go",
		Old:  `if !undone && p != nil && p.phase != "" {`,
		New:  `if false && !undone && p != nil && p.phase != "" {`,
		// The faults that leave a checkout unfinished past a committed
		// phase: the provider's outages, and kills between phases and
		// after the charge.
		Faults: []Fault{{Kind: FaultProvider}, {Kind: FaultKillAt, Point: PointBetween}, {Kind: FaultKillAt, Point: PointInCall}},
	},
	{
		Name: "commit-failure-ignored", Invariant: 7, ServerKills: true,
		What: "a commit that failed, as one does when the server dies under it, is taken for one that happened, and its response answered",
		// The kills before and as a final effect's commit, where the
		// commit fails and its response is the client's answer.
		Faults: []Fault{{Kind: FaultServerKill, Point: PointFinalCommit}, {Kind: FaultServerKill, Point: PointFinalCommitRace}},
		File:   "driver_sql.go",
		Old:    "if err := o.tx.Commit(); err != nil {",
		New:    "if err := o.tx.Commit(); false && err != nil {",
	},
}

// CanFind reports whether a campaign on tg can find m.
func (m Mutation) CanFind(tg Target) bool { return !m.ServerKills || tg.Control != "" }

// MutationNamed returns the mutation called name.
func MutationNamed(name string) (Mutation, error) {
	for _, m := range Mutations {
		if m.Name == name {
			return m, nil
		}
	}
	return Mutation{}, fmt.Errorf("campaign: no mutation %q (see -list-mutations)", name)
}

// BuildMutated builds the campaign's program, from the package pkg, with
// the library's file mutated, into dir, and returns the binary's path.
// It runs the go command in the proving ground's directory, wherever the
// library's module is found from there (the workspace's checkout).
func BuildMutated(m Mutation, pkg, dir string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/idemgo/idem").Output()
	if err != nil {
		return "", fmt.Errorf("campaign: find the library's source: %w", err)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), m.File)
	src, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	if bytes.Count(src, []byte(m.Old)) != 1 {
		return "", fmt.Errorf("campaign: mutation %s: %s no longer holds %q once; bring the mutation up to date", m.Name, m.File, m.Old)
	}
	mutated := filepath.Join(dir, "mutated-"+filepath.Base(m.File))
	if err := os.WriteFile(mutated, bytes.Replace(src, []byte(m.Old), []byte(m.New), 1), 0o644); err != nil {
		return "", err
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{file: mutated}})
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "campaign-"+m.Name)
	cmd := exec.Command("go", "build", "-overlay", overlayFile, "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("campaign: build mutation %s: %v\n%s", m.Name, err, out)
	}
	return bin, nil
}
