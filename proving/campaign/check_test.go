package campaign

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// testHistory builds a history for the checker's tests on one record,
// that of the payment key "pay-01" of client-a under shard 1.
type testHistory struct {
	events []Event
	t      int64
}

func (h *testHistory) add(e Event) {
	h.t += 1000
	e.T = h.t
	h.events = append(h.events, e)
}

var testOp = Op{Client: 0, Surface: SurfaceDo, Key: "pay-01", Scope: "client-a", Shard: 1}

// answered records the seq-th operation, sent as request req, answered
// outcome with the response of incarnation inc (settled, when it is),
// which the first operation's work made.
func (h *testHistory) answered(seq, req int, outcome string, inc int64, settled bool) {
	op := testOp
	op.Seq, op.Request = seq, req
	h.add(Event{Type: EvInvoke, Op: &op})
	b := Body{Key: []byte(op.StoredKey()), Shard: op.Shard, Op: testOp.ID(), Settled: settled}
	a := Answer{Outcome: outcome, Inc: inc}
	if !settled {
		b.Inc = inc
	}
	if outcome == "claimed" || outcome == "replay" {
		a.Body, _ = json.Marshal(b)
		a.Status = 201
	}
	h.add(Event{Type: EvAnswer, Op: &op, Answer: &a})
}

// effect records the committed effect of phase for incarnation inc, made
// by the first operation's work.
func (h *testHistory) effect(inc int64, phase string) {
	op := testOp
	body, _ := json.Marshal(Body{Key: []byte(op.StoredKey()), Shard: op.Shard, Inc: inc, Op: op.ID()})
	e := Effect{Key: []byte(op.StoredKey()), Shard: 1, Inc: inc, Phase: phase, Op: op.ID(), Header: "null"}
	if phase == "final" {
		e.Status, e.Body = 201, body
	}
	h.add(Event{Type: EvEffect, Effect: &e})
}

func invariantsOf(vs []Violation) []int {
	var ns []int
	for _, v := range vs {
		if !slices.Contains(ns, v.Invariant) {
			ns = append(ns, v.Invariant)
		}
	}
	return ns
}

// TestCheck shows each invariant of the checker broken by a history made
// for it, and holding on the histories that look like a break and are not.
func TestCheck(t *testing.T) {
	i64 := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name  string
		build func(h *testHistory)
		want  []int
	}{
		{"claimed then replayed", func(h *testHistory) {
			h.answered(0, 0, "claimed", 7, false)
			h.answered(1, 0, "replay", 7, false)
			h.answered(2, 1, "mismatch", 7, false)
			h.effect(7, "final")
		}, nil},
		{"settled responses of two incarnations, to two requests", func(h *testHistory) {
			h.answered(0, 0, "replay", 7, true)
			h.answered(1, 1, "replay", 8, true)
		}, nil},
		{"a phase committed twice", func(h *testHistory) {
			h.answered(0, 0, "claimed", 7, false)
			h.effect(7, "final")
			h.effect(7, "final")
		}, []int{1}},
		{"a final answer without its effect", func(h *testHistory) {
			h.answered(0, 0, "claimed", 7, false)
		}, []int{7}},
		{"a final answer whose effect a server kill lost", func(h *testHistory) {
			h.answered(0, 0, "claimed", 7, false)
			h.add(Event{Type: EvServer, Server: &ServerEvent{Killed: true, Point: PointAnywhere}})
		}, []int{7}},
		{"a record committed unfinished that Unfinished does not list", func(h *testHistory) {
			h.add(Event{Type: EvRecord, Record: &RecordEnd{Key: []byte(testOp.StoredKey()), Shard: 1, Inc: 7, Outcome: "inflight"}})
		}, []int{7}},
		{"a record committed unfinished that Unfinished lists", func(h *testHistory) {
			h.add(Event{Type: EvRecord, Record: &RecordEnd{Key: []byte(testOp.StoredKey()), Shard: 1, Inc: 7, Outcome: "inflight"}})
			h.add(Event{Type: EvUnfinished, Unfinished: &Unfinished{Key: []byte(testOp.StoredKey()), Shard: 1, Inc: 7}})
		}, nil},
		{"another request answered from the incarnation", func(h *testHistory) {
			h.answered(0, 0, "claimed", 7, false)
			h.answered(1, 1, "replay", 7, false)
			h.effect(7, "final")
		}, []int{3}},
		{"the request Mismatched by its own incarnation", func(h *testHistory) {
			h.answered(0, 0, "claimed", 7, false)
			h.answered(1, 0, "mismatch", 7, false)
			h.effect(7, "final")
		}, []int{3}},
		{"a record deleted before it expired", func(h *testHistory) {
			h.add(Event{Type: EvAudit, Audit: &AuditRow{Seq: 1, At: 5000, Kind: "D", Key: []byte(testOp.StoredKey()), Shard: 1,
				Old: RecordState{Inc: i64(7), Status: i64(201), Expires: i64(9000)}}})
		}, []int{4}},
		{"a record deleted early while a clock ran that far ahead", func(h *testHistory) {
			h.add(Event{Type: EvFault, Fault: &Fault{Kind: FaultClock, Point: "-1000", For: time.Second}})
			h.add(Event{Type: EvAudit, Audit: &AuditRow{Seq: 1, At: 5000, Kind: "D", Key: []byte(testOp.StoredKey()), Shard: 1,
				Old: RecordState{Inc: i64(7), Status: i64(201), Expires: i64(9000)}}})
		}, nil},
		{"a record deleted earlier than a clock ran ahead", func(h *testHistory) {
			h.add(Event{Type: EvFault, Fault: &Fault{Kind: FaultClock, Point: "1", For: time.Second}})
			h.add(Event{Type: EvAudit, Audit: &AuditRow{Seq: 1, At: 5000, Kind: "D", Key: []byte(testOp.StoredKey()), Shard: 1,
				Old: RecordState{Inc: i64(7), Status: i64(201), Expires: i64(9000)}}})
		}, []int{4}},
		{"a record deleted once it expired", func(h *testHistory) {
			h.add(Event{Type: EvAudit, Audit: &AuditRow{Seq: 1, At: 9000, Kind: "D", Key: []byte(testOp.StoredKey()), Shard: 1,
				Old: RecordState{Inc: i64(7), Status: i64(201), Expires: i64(9000)}}})
		}, nil},
		{"one call key from two incarnations", func(h *testHistory) {
			h.add(Event{Type: EvCall, Call: &Call{CallKey: "ck", Key: []byte("k"), Shard: 1, Inc: 7}})
			h.add(Event{Type: EvCall, Call: &Call{CallKey: "ck", Key: []byte("k"), Shard: 1, Inc: 8}})
		}, []int{5}},
		{"Forget of an unfinished record", func(h *testHistory) {
			op := Op{Client: operatorClient, Action: ActForget, Key: testOp.Key, Scope: testOp.Scope, Shard: 1}
			h.add(Event{Type: EvInvoke, Op: &op})
			h.add(Event{Type: EvAudit, Audit: &AuditRow{Seq: 1, At: h.t + 500, Kind: "D", Key: []byte(op.StoredKey()), Shard: 1,
				Old: RecordState{Inc: i64(7), Expires: i64(1 << 62)}}})
			h.add(Event{Type: EvAnswer, Op: &op, Answer: &Answer{Outcome: "ok"}})
		}, []int{6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &testHistory{}
			tc.build(h)
			if got := invariantsOf(Check(h.events, true)); !slices.Equal(got, tc.want) {
				t.Errorf("broken invariants %v, want %v:\n%v", got, tc.want, Check(h.events, true))
			}
		})
	}
}
