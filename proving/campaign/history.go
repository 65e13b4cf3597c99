package campaign

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"time"
)

// Event is one line of a campaign's history: an operation invoked or
// answered, a fault, a call the provider took, and, at the end, what the
// database holds: the effects, the audit of the Store's table, its
// unfinished requests.
type Event struct {
	T    int64  `json:"t"` // microseconds since the epoch, by the campaign's clock
	Type string `json:"type"`

	Op         *Op          `json:"op,omitempty"`
	Answer     *Answer      `json:"answer,omitempty"`
	Fault      *Fault       `json:"fault,omitempty"`
	Call       *Call        `json:"call,omitempty"`
	Effect     *Effect      `json:"effect,omitempty"`
	Audit      *AuditRow    `json:"audit,omitempty"`
	Unfinished *Unfinished  `json:"unfinished,omitempty"`
	Server     *ServerEvent `json:"server,omitempty"`
	Record     *RecordEnd   `json:"record,omitempty"`
	Note       string       `json:"note,omitempty"`
}

// The types of Event.
const (
	EvInvoke     = "invoke"
	EvAnswer     = "answer"
	EvFault      = "fault"
	EvCall       = "call"
	EvQuiet      = "quiet" // the faults stopped
	EvEffect     = "effect"
	EvAudit      = "audit"
	EvUnfinished = "unfinished"
	EvServer     = "server" // the database server killed, or up again
	EvRecord     = "record" // a record as Store.Lookup read it at the end
)

// ServerEvent is a kill of the database server, by the campaign or by a
// service at Point, or the end of its restart, which took Took.
type ServerEvent struct {
	Killed  bool          `json:"killed,omitempty"`
	Point   string        `json:"point,omitempty"`
	Service int           `json:"service,omitempty"`
	Up      bool          `json:"up,omitempty"`
	Took    time.Duration `json:"took,omitempty"`
	Err     string        `json:"err,omitempty"`
}

// RecordEnd is what Store.Lookup answered, once every request had its
// final answer, for a record that a request of the history named:
// Outcome is replay, inflight (committed unfinished) or none.
type RecordEnd struct {
	Key     []byte `json:"key"`
	Shard   int64  `json:"shard"`
	Inc     int64  `json:"inc,omitempty"`
	Outcome string `json:"outcome"`
}

// Effect is a row of the effects table: work that committed.
type Effect struct {
	Seq    int64  `json:"seq"`
	Key    []byte `json:"key"`
	Shard  int64  `json:"shard"`
	Inc    int64  `json:"inc"`
	Phase  string `json:"phase"`
	Op     string `json:"op"`
	Status int    `json:"status"`
	Header string `json:"header"`
	Body   []byte `json:"body"`
	At     int64  `json:"at"`
}

// AuditRow is a change to a record of the Store's table, by the
// database's clock: I an insert, U an update, D a delete, with what the
// record held before (Old, for U and D) and after (New, for I and U).
type AuditRow struct {
	Seq   int64       `json:"seq"`
	At    int64       `json:"at"`
	Kind  string      `json:"kind"`
	Key   []byte      `json:"key"`
	Shard int64       `json:"shard"`
	Old   RecordState `json:"old"`
	New   RecordState `json:"new"`
}

// RecordState is what the audit keeps of a record: NULL columns are nil.
type RecordState struct {
	Inc     *int64  `json:"inc,omitempty"`
	Status  *int64  `json:"status,omitempty"`
	Body    []byte  `json:"body,omitempty"`
	Expires *int64  `json:"expires,omitempty"`
	Lease   *int64  `json:"lease,omitempty"`
	Phase   *string `json:"phase,omitempty"`
}

// Unfinished is a request that Store.Unfinished listed once the faults
// stopped and the clients' last retries were answered.
type Unfinished struct {
	Key      []byte        `json:"key"`
	Shard    int64         `json:"shard"`
	Inc      int64         `json:"inc"`
	Phase    string        `json:"phase"`
	ResumeIn time.Duration `json:"resume_in"`
}

// history records events, in memory for the checker and as JSON lines in
// a file.
type history struct {
	mu     sync.Mutex
	events []Event
	f      *os.File
	w      *bufio.Writer
	enc    *json.Encoder
}

func newHistory(path string) (*history, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(f)
	return &history{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// add records e, stamped now unless it has its time.
func (h *history) add(e Event) {
	if e.T == 0 {
		e.T = time.Now().UnixMicro()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	_ = h.enc.Encode(e)
}

// snapshot returns the events recorded so far.
func (h *history) snapshot() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

func (h *history) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.w.Flush(); err != nil {
		return err
	}
	return h.f.Close()
}

// ReadHistory reads the events of a history file.
func ReadHistory(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []Event
	dec := json.NewDecoder(f)
	for dec.More() {
		var e Event
		if err := dec.Decode(&e); err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, nil
}
