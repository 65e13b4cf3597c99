package idem_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// failureKind names the retryable failure that a statement's error
// reports, or returns "" for any other error. PostgreSQL's errors are read
// through SQLState, which lib/pq's and pgx's errors both have.
func failureKind(err error) string {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case 1213:
			return "deadlock 1213"
		case 1020:
			return "snapshot conflict 1020"
		case 1205:
			return "lock wait timeout 1205"
		case 9007:
			return "write conflict 9007"
		}
		return ""
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		switch pg.SQLState() {
		case "40P01":
			return "deadlock 40P01"
		case "40001":
			return "serialization failure 40001"
		case "55P03":
			return "lock wait timeout 55P03"
		}
	}
	return ""
}

// tally counts events by name, from many goroutines.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = make(map[string]int)
	}
	t.n[name]++
}

func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum := 0
	for _, n := range t.n {
		sum += n
	}
	return sum
}

// String lists the counts by name, or says "none".
func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.n) == 0 {
		return "none"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(t.n)) {
		parts = append(parts, fmt.Sprintf("%s %d", name, t.n[name]))
	}
	return strings.Join(parts, ", ")
}

// findings collects the failed checks of a run by kind, so that a run with
// hundreds of bad keys reports how many of each, with a few examples,
// rather than hundreds of lines.
type findings struct {
	t      *testing.T
	byKind map[string][]string
}

// findingExamples is how many examples report shows of each kind.
const findingExamples = 5

func (f *findings) add(kind, format string, args ...any) {
	if f.byKind == nil {
		f.byKind = make(map[string][]string)
	}
	f.byKind[kind] = append(f.byKind[kind], fmt.Sprintf(format, args...))
}

// report fails the test once per kind of finding.
func (f *findings) report() {
	f.t.Helper()
	for _, kind := range slices.Sorted(maps.Keys(f.byKind)) {
		all := f.byKind[kind]
		examples := all[:min(len(all), findingExamples)]
		f.t.Errorf("%s: %d, for example:\n\t%s", kind, len(all), strings.Join(examples, "\n\t"))
	}
}
