package campaign

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The invariants, each named by the sentence of docs/contract.md or
// docs/operations.md that it checks.
var Invariants = map[int]string{
	1: "each record incarnation's effects are committed at most once per phase",
	2: "every answer a client got for an incarnation equals the stored response byte for byte",
	3: "another request under a live key is answered Mismatch or InFlight, never with the other request's response",
	4: "once faults stop, every key reaches a final state, or is listed by Unfinished with the time Resume takes it; a record ends only by its expiry or an operator's action",
	5: "the provider never sees one call key from two incarnations or from two shard values",
	6: "after an operator's documented action, the next request behaves as docs/operations.md says",
	7: "nothing that a client saw acknowledged is lost, across a crash of the database server too, and no record is left that no request, Resume or operator can finish",
}

// Violation is a broken invariant, with the operations that show it.
type Violation struct {
	Invariant int
	Detail    string
	Ops       []string // the operations' IDs
}

func (v Violation) String() string {
	return fmt.Sprintf("invariant %d (%s): %s; operations %v", v.Invariant, Invariants[v.Invariant], v.Detail, v.Ops)
}

// clockSlack is how far the database's clock, which stamps the audit, may
// read behind the Store's, which stamps expiry, on one machine: SQLite's
// clock counts whole milliseconds.
const clockSlack = 2 * time.Millisecond

// record names one record of the Store's table: a stored key, under a
// shard value.
type record struct {
	key   string
	shard int64
}

type incarnation struct {
	record
	inc int64
}

// call is one operation of the history, with its answer.
type call struct {
	op       Op
	answer   *Answer
	invoked  int64
	answered int64
}

func (c call) rec() record { return record{c.op.StoredKey(), c.op.RecordShard()} }

// Check checks the invariants on a campaign's history; audited says
// whether the history holds the audit of the Store's table, which the
// checks of record ends need.
func Check(events []Event, audited bool) []Violation {
	var (
		calls   []*call
		open    = map[string]*call{}
		effects = map[incarnation][]*Effect{}
		audit   []*AuditRow
		unfin   []*Unfinished
		ends    []*RecordEnd
		kills   []int64 // when the database server was killed
		skews   []skew
		byCall  = map[string][]*Call{}
		vs      []Violation
	)
	for _, e := range events {
		switch e.Type {
		case EvInvoke:
			c := &call{op: *e.Op, invoked: e.T}
			calls = append(calls, c)
			open[e.Op.ID()] = c
		case EvAnswer:
			if c := open[e.Op.ID()]; c != nil {
				c.answer, c.answered = e.Answer, e.T
				delete(open, e.Op.ID())
			}
		case EvEffect:
			k := incarnation{record{string(e.Effect.Key), e.Effect.Shard}, e.Effect.Inc}
			effects[k] = append(effects[k], e.Effect)
		case EvAudit:
			audit = append(audit, e.Audit)
		case EvUnfinished:
			unfin = append(unfin, e.Unfinished)
		case EvCall:
			byCall[e.Call.CallKey] = append(byCall[e.Call.CallKey], e.Call)
		case EvRecord:
			ends = append(ends, e.Record)
		case EvServer:
			if e.Server.Killed {
				kills = append(kills, e.T)
			}
		case EvFault:
			if e.Fault.Kind == FaultClock {
				skews = append(skews, skewOf(e))
			}
		}
	}
	deletes := attributeDeletes(calls, audit, skews)

	// 1: effects per phase, and the final effect behind each final answer.
	for _, k := range sortedIncarnations(effects) {
		if deletes.undone[k] {
			continue // the operator undid them before ReleaseUndone
		}
		phases := map[string][]string{}
		for _, e := range effects[k] {
			phases[e.Phase] = append(phases[e.Phase], e.Op)
		}
		for _, ph := range slices.Sorted(maps.Keys(phases)) {
			if ops := phases[ph]; len(ops) > 1 {
				vs = append(vs, Violation{1, fmt.Sprintf("phase %s of incarnation %d of %s committed %d times", ph, k.inc, k.record, len(ops)), ops})
			}
		}
	}

	// 2: every answer equals the stored response.
	stored := storedResponses(audit)
	for _, c := range calls {
		b, ok := c.body()
		if !ok {
			continue
		}
		k := c.incarnationOf(b)
		// A gRPC call's stored response is its encoded reply, whose
		// body field the client read: that field is what compares.
		if s, ok := stored[k]; ok && !isGRPC(c.op) {
			if s.status != int64(c.answer.Status) || !bytes.Equal(s.body, c.answer.Body) {
				vs = append(vs, Violation{2, fmt.Sprintf("answered %d %q, stored %d %q", c.answer.Status, c.answer.Body, s.status, s.body), []string{c.op.ID()}})
			}
		}
		if b.Settled {
			continue
		}
		for _, e := range effects[k] {
			if e.Phase != "final" {
				continue
			}
			var h map[string][]string
			_ = json.Unmarshal([]byte(e.Header), &h)
			same := bytes.Equal(e.Body, c.answer.Body)
			if !isGRPC(c.op) {
				same = same && e.Status == c.answer.Status && sameHeaders(h, c.answer.Header)
			}
			if !same {
				vs = append(vs, Violation{2, fmt.Sprintf("answered %d %v %q, the work made %d %v %q", c.answer.Status, c.answer.Header, c.answer.Body, e.Status, h, e.Body), []string{c.op.ID(), e.Op}})
			}
		}
	}

	// 2, also: an answer names the incarnation whose response it carries.
	for _, c := range calls {
		if b, ok := c.body(); ok && !b.Settled && c.answer.Inc != 0 && c.answer.Inc != b.Inc {
			vs = append(vs, Violation{2, fmt.Sprintf("answered %s naming incarnation %d with the response of incarnation %d", c.answer.Outcome, c.answer.Inc, b.Inc), []string{c.op.ID(), b.Op}})
		}
	}

	// 3: a response only ever goes to the request it answers: every
	// answer from one incarnation went to one request, and a Mismatch
	// never to the request whose incarnation refused it.
	requests := map[incarnation]map[int][]string{}
	for _, c := range calls {
		b, ok := c.body()
		if !ok {
			continue
		}
		k := c.incarnationOf(b)
		if k.inc == 0 {
			continue // a settled response that names no incarnation
		}
		if r := c.rec(); k.record != r {
			vs = append(vs, Violation{3, fmt.Sprintf("a request on %s was answered %s with a response of %s", r, c.answer.Outcome, k.record), []string{c.op.ID(), b.Op}})
			continue
		}
		if requests[k] == nil {
			requests[k] = map[int][]string{}
		}
		requests[k][c.op.Request] = append(requests[k][c.op.Request], c.op.ID())
	}
	for _, k := range slices.SortedFunc(maps.Keys(requests), compareIncarnations) {
		if byReq := requests[k]; len(byReq) > 1 {
			vs = append(vs, Violation{3, fmt.Sprintf("requests 0 and 1 on %s were both answered from incarnation %d", k.record, k.inc), append(byReq[0][:1:1], byReq[1][0])})
		}
	}
	for _, c := range calls {
		if c.answer == nil || c.answer.Outcome != "mismatch" || c.answer.Inc == 0 {
			continue
		}
		if ops := requests[incarnation{c.rec(), c.answer.Inc}][c.op.Request]; len(ops) > 0 {
			vs = append(vs, Violation{3, fmt.Sprintf("request %d on %s was answered Mismatch by incarnation %d, which answers that request", c.op.Request, c.rec(), c.answer.Inc), []string{c.op.ID(), ops[0]}})
		}
	}

	// 4: the drain's retries end, nothing is left beyond Resume's reach,
	// and a record ends only by its expiry or an operator's action.
	last := map[string]*call{}
	for _, c := range calls {
		if c.op.Client == drainClient {
			last[fmt.Sprint(c.rec(), c.op.Request)] = c
		}
	}
	for _, id := range slices.Sorted(maps.Keys(last)) {
		if c := last[id]; c.answer == nil || !final(*c.answer) {
			vs = append(vs, Violation{4, fmt.Sprintf("request %d on %s reached no final state within %s of the faults' end: %+v", c.op.Request, c.rec(), drainBound, c.answer), []string{c.op.ID()}})
		}
	}
	for _, u := range unfin {
		if u.ResumeIn > drainBound {
			vs = append(vs, Violation{4, fmt.Sprintf("incarnation %d of %s is unfinished at %q, and Resume takes it only in %s", u.Inc, record{string(u.Key), u.Shard}, u.Phase, u.ResumeIn), nil})
		}
	}
	if audited {
		for _, a := range audit {
			ended := a.Kind == "D" || (a.Kind == "U" && a.Old.Inc != nil && a.New.Inc != nil && *a.Old.Inc != *a.New.Inc)
			if !ended || deletes.byAction[a.Seq] != "" {
				continue
			}
			if a.Old.Expires == nil || *a.Old.Expires > a.At+clockSlack.Microseconds()+skewAt(skews, a.At) {
				vs = append(vs, Violation{4, fmt.Sprintf("incarnation %d of %s ended (%s) %s before it expired, by no operator's action",
					deref(a.Old.Inc), record{string(a.Key), a.Shard}, a.Kind, time.Duration(deref(a.Old.Expires)-a.At)*time.Microsecond), nil})
			}
		}
	}

	// 5: one call key, one record.
	for _, ck := range slices.Sorted(maps.Keys(byCall)) {
		seen := map[incarnation]bool{}
		for _, c := range byCall[ck] {
			seen[incarnation{record{string(c.Key), c.Shard}, c.Inc}] = true
		}
		if len(seen) > 1 {
			vs = append(vs, Violation{5, fmt.Sprintf("call key %s came from %d records: %v", ck, len(seen), slices.Collect(maps.Keys(seen))), nil})
		}
	}

	// 6: each operator's action did what operations.md says, and nothing
	// answered from a record after an action deleted it.
	if audited {
		vs = append(vs, deletes.violations...)
		for _, c := range calls {
			b, ok := c.body()
			if !ok {
				continue
			}
			k := c.incarnationOf(b)
			if at, ok := deletes.at[k]; ok && c.invoked > at+clockSlack.Microseconds() {
				vs = append(vs, Violation{6, fmt.Sprintf("answered %s from incarnation %d of %s, which was deleted before the request came", c.answer.Outcome, k.inc, k.record), []string{c.op.ID()}})
			}
		}
	}
	// 7: the final effect behind every final answer is committed, also
	// where the server was killed after the answer, and every record
	// committed unfinished is one that Unfinished lists.
	for _, c := range calls {
		b, ok := c.body()
		if !ok || b.Settled {
			continue
		}
		k := c.incarnationOf(b)
		if finals(effects[k]) == 0 {
			after := 0
			for _, t := range kills {
				if t > c.answered {
					after++
				}
			}
			vs = append(vs, Violation{7, fmt.Sprintf("answered %s for incarnation %d of %s, whose final effect is not committed (%d server kills after the answer)", c.answer.Outcome, b.Inc, k.record, after), []string{c.op.ID()}})
		}
	}
	listed := map[record]bool{}
	for _, u := range unfin {
		listed[record{string(u.Key), u.Shard}] = true
	}
	for _, r := range ends {
		if rec := (record{string(r.Key), r.Shard}); r.Outcome == "inflight" && !listed[rec] {
			vs = append(vs, Violation{7, fmt.Sprintf("incarnation %d of %s is committed unfinished, and Unfinished does not list it", r.Inc, rec), nil})
		}
	}
	return vs
}

// skew is a clock fault: for a while, a service's Store clock read ahead
// of, or behind, the others'.
type skew struct{ from, to, by int64 }

func skewOf(e Event) skew {
	ms, _ := strconv.Atoi(e.Fault.Point)
	by := time.Duration(max(ms, -ms)) * time.Millisecond
	// The arm reaches the service a moment after the fault, which ends
	// a moment after For.
	return skew{from: e.T, to: e.T + (e.Fault.For + time.Second).Microseconds(), by: by.Microseconds()}
}

// skewAt is how far apart the Stores' clocks may have read at t: a
// record expires when the clock of the process that next claims or
// purges it says so (WithClock), and a clock fault moves one.
func skewAt(skews []skew, t int64) int64 {
	var by int64
	for _, s := range skews {
		if s.from <= t && t <= s.to {
			by = max(by, s.by)
		}
	}
	return by
}

func (r record) String() string {
	// A stored key is the scope's hash, a colon and the client's key:
	// a few digits of the hash tell the scopes apart.
	if i := strings.IndexByte(r.key, ':'); i >= 8 {
		return fmt.Sprintf("%s…%s/%d", r.key[:8], r.key[i:], r.shard)
	}
	return fmt.Sprintf("%q/%d", r.key, r.shard)
}

// body returns the body of a response that the call was answered with.
func (c *call) body() (Body, bool) {
	if c.answer == nil || (c.answer.Outcome != "claimed" && c.answer.Outcome != "replay") {
		return Body{}, false
	}
	var b Body
	if err := json.Unmarshal(c.answer.Body, &b); err != nil {
		return Body{}, false
	}
	return b, true
}

// incarnationOf is the incarnation whose response b is: the one the
// work wrote into it, or, for a settled response, which names none, the
// one the answer named (Result.Incarnation, on the direct surfaces), 0
// where nothing names it.
func (c *call) incarnationOf(b Body) incarnation {
	inc := b.Inc
	if b.Settled {
		inc = c.answer.Inc
	}
	return incarnation{record{string(b.Key), b.Shard}, inc}
}

// finals counts the final effects among es.
func finals(es []*Effect) int {
	n := 0
	for _, e := range es {
		if e.Phase == "final" {
			n++
		}
	}
	return n
}

// sameHeaders compares the headers the workload keeps.
func sameHeaders(a, b map[string][]string) bool {
	for _, h := range []string{"Content-Type", "X-Campaign-Inc"} {
		if !slices.Equal(a[h], b[h]) {
			return false
		}
	}
	return true
}

type storedResponse struct {
	status int64
	body   []byte
}

// storedResponses returns, for each incarnation, the response that the
// audit shows its record finished with.
func storedResponses(audit []*AuditRow) map[incarnation]storedResponse {
	m := map[incarnation]storedResponse{}
	for _, a := range audit {
		if a.New.Status == nil || a.New.Inc == nil {
			continue
		}
		k := incarnation{record{string(a.Key), a.Shard}, *a.New.Inc}
		if _, ok := m[k]; !ok {
			m[k] = storedResponse{*a.New.Status, a.New.Body}
		}
	}
	return m
}

// deleteAttribution ties the audit's deletions and settlements to the
// operators' actions that made them.
type deleteAttribution struct {
	byAction   map[int64]string      // audit seq: the action that made it
	at         map[incarnation]int64 // when an action deleted an incarnation
	undone     map[incarnation]bool  // incarnations ReleaseUndone deleted, their effects undone
	violations []Violation
}

func attributeDeletes(calls []*call, audit []*AuditRow, skews []skew) deleteAttribution {
	d := deleteAttribution{byAction: map[int64]string{}, at: map[incarnation]int64{}, undone: map[incarnation]bool{}}
	slack := clockSlack.Microseconds()
	// Each record's changes, in the audit's order: a long campaign's
	// actions are many, and each looks at its own record's alone.
	byRecord := map[record][]*AuditRow{}
	for _, a := range audit {
		r := record{string(a.Key), a.Shard}
		byRecord[r] = append(byRecord[r], a)
	}
	for _, c := range calls {
		// An action that was not refused may have acted: one that
		// answered ok, and one whose answer was lost or that failed at
		// its commit, which may have landed.
		if c.op.Action == "" || c.op.Action == ActPurge || c.answer == nil || c.answer.Refused != "" {
			continue
		}
		r := c.rec()
		// The change the action made: a settlement whose stored body
		// names the action (the settled body does), or a deletion of the
		// record in the action's time. Purge may delete an expired record
		// in that time too, which needs no operator to explain it: a
		// deletion of a live record comes first.
		var found, expired *AuditRow
		marker := []byte(fmt.Sprintf(`"op":%q`, c.op.ID()))
		for _, a := range byRecord[r] {
			if a.At < c.invoked-slack || a.At > c.answered+slack || d.byAction[a.Seq] != "" {
				continue
			}
			switch {
			case c.op.Action == ActSettle:
				if a.Kind == "U" && a.Old.Status == nil && a.New.Status != nil && bytes.Contains(a.New.Body, marker) {
					found = a
				}
			case a.Kind != "D":
			case a.Old.Expires != nil && *a.Old.Expires <= a.At+slack+skewAt(skews, a.At):
				expired = a
			default:
				found = a
			}
			if found != nil {
				break
			}
		}
		if found == nil {
			if c.answer.Outcome == "ok" && expired == nil {
				d.violations = append(d.violations, Violation{6, fmt.Sprintf("%s of %s succeeded, and changed no record", c.op.Action, r), []string{c.op.ID()}})
			}
			continue
		}
		d.byAction[found.Seq] = c.op.ID()
		k := incarnation{r, deref(found.Old.Inc)}
		// A lease holds an unfinished request alone: a finished record keeps
		// its last lease, which no longer means anything.
		held := found.Old.Status == nil && found.Old.Lease != nil && *found.Old.Lease > found.At+slack
		var wrong string
		switch {
		case c.op.Action == ActForget && found.Old.Status == nil:
			wrong = "an unfinished record"
		case c.op.Action != ActForget && found.Old.Status != nil:
			wrong = "a finished record"
		case held:
			wrong = fmt.Sprintf("a record whose lease ran %s more", time.Duration(*found.Old.Lease-found.At)*time.Microsecond)
		case c.op.Action == ActRelease && found.Old.Phase != nil && *found.Old.Phase != "":
			wrong = fmt.Sprintf("a record with a committed phase (%s)", *found.Old.Phase)
		}
		if wrong != "" {
			d.violations = append(d.violations, Violation{6, fmt.Sprintf("%s of %s acted on %s, which it must refuse", c.op.Action, r, wrong), []string{c.op.ID()}})
		}
		if found.Kind == "D" {
			d.at[k] = found.At
			if c.op.Action == ActReleaseUndone {
				d.undone[k] = true
			}
		}
	}
	return d
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func sortedIncarnations(m map[incarnation][]*Effect) []incarnation {
	return slices.SortedFunc(maps.Keys(m), compareIncarnations)
}

func compareIncarnations(a, b incarnation) int {
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.shard, b.shard), cmp.Compare(a.inc, b.inc))
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
