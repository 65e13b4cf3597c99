package main

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/idemgo/idem"
)

func info(ns, wf, run, act string) activity.Info {
	return activity.Info{
		Namespace:         ns,
		WorkflowExecution: workflow.Execution{ID: wf, RunID: run},
		ActivityID:        act,
		Attempt:           1,
	}
}

// TestActivityKey checks that the key takes every id in and the attempt
// out, that ids which would run together under a plain separator give
// different keys, and that a key too long for idem is hashed to one that
// fits.
func TestActivityKey(t *testing.T) {
	base := info("default", "order-1", "run-1", "5")
	k := ActivityKey(base)
	if want := `temporal "default" "order-1" "run-1" "5"`; k != want {
		t.Errorf("key %s, want %s", k, want)
	}
	retry := base
	retry.Attempt = 7
	if ActivityKey(retry) != k {
		t.Errorf("attempt 7 has key %s, attempt 1 %s", ActivityKey(retry), k)
	}
	others := []activity.Info{
		info("other", "order-1", "run-1", "5"),
		info("default", "order-2", "run-1", "5"),
		info("default", "order-1", "run-2", "5"),
		info("default", "order-1", "run-1", "6"),
		info("default", `order-1" "run-1`, "", "5"), // the ids run together
	}
	seen := map[string]bool{k: true}
	for _, o := range others {
		ok := ActivityKey(o)
		if seen[ok] {
			t.Errorf("%+v: key %s taken", o, ok)
		}
		seen[ok] = true
	}
	long := info("default", strings.Repeat("w", 1000), "run-1", "5")
	lk := ActivityKey(long)
	if len(lk) > idem.MaxStoredKeyBytes || !strings.HasPrefix(lk, "temporal sha256 ") {
		t.Errorf("a 1000-byte workflow id gives key %q (%d bytes)", lk, len(lk))
	}
	long.ActivityID = "6"
	if ActivityKey(long) == lk {
		t.Errorf("two activities of a long workflow id share key %s", lk)
	}
}
