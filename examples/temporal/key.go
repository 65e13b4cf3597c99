package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/idemgo/idem"
)

// ActivityKey returns the idempotency key of the activity execution that
// info describes: its namespace, its workflow's id and run id, and its
// activity id.
//
// These are the ids that stay the same across every attempt of one
// activity: Temporal retries an activity that failed, timed out or whose
// worker died with the same workflow id, run id and activity id, on any
// worker (TestKilledAfterCommit), so the retry of an attempt that had
// committed finds its key and replays. The attempt number is left out, as
// it is exactly what changes between retries.
//
// The run id is in, although it too stays the same across retries,
// because the activity id alone does not name one activity of a
// workflow: the SDK numbers a workflow's activities by their place in its
// run's history, so every run of a workflow id starts the count afresh. A
// workflow that continues as new gives the first activity of each run the
// same activity id (TestContinueAsNewKeysEachRun): without the run id, the
// second run's charge would replay the first run's, and one payment would
// be missing. A reset starts a new run too, which runs the activities after
// the reset point again, under new keys: the reset is an operator's order to
// do them again (TestResetChargesAgain). The same holds for a workflow
// retried as a whole by its own retry policy, or started again under the
// same id once the first has closed: its activities run again. Work whose
// identity outlives a run (an order paid at most once, whatever the
// workflow does) is keyed on that identity instead, passed in the
// activity's input.
//
// The namespace is in because workflow ids are unique within a namespace
// only, and several namespaces may share one database. The parts are
// quoted, so that no two executions give the same key; a key that would be
// longer than idem.MaxStoredKeyBytes (Temporal's ids may be longer) is
// replaced by a SHA-256 of it.
func ActivityKey(info activity.Info) string {
	k := fmt.Sprintf("temporal %q %q %q %q", info.Namespace,
		info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID)
	if len(k) <= idem.MaxStoredKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "temporal sha256 " + hex.EncodeToString(sum[:])
}
